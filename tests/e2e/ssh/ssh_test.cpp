// End-to-end tests of the SSH layer against real OpenSSH servers in network namespaces.
// Every case builds its own TestHosts, so a failing case still tears its hosts down (RAII).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "e2e/ssh/ssh_support.hpp"
#include "hosts/test_hosts.hpp"
#include "ssh/session.hpp"

using namespace ssh_support;

TEST_CASE("ssh: connect, exec with exit status and streamed lines", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    CHECK(s.alive());
    CHECK(s.host_key_fingerprint() == hosts.host_key_fingerprint(0));

    std::vector<std::string> out, err;
    ExecOptions eo;
    eo.on_stdout = [&](std::string_view l) { out.emplace_back(l); };
    eo.on_stderr = [&](std::string_view l) { err.emplace_back(l); };
    auto r = s.exec("echo one; echo oops >&2; printf 'two\\nthree'; exit 7", eo);
    CHECK(r.exit_status == 7);
    CHECK(out == std::vector<std::string>{"one", "two", "three"});
    CHECK(err == std::vector<std::string>{"oops"});

    auto captured = s.exec("id -u; hostname -I");
    CHECK(captured.exit_status == 0);
    CHECK(captured.out.find("0\n") == 0);
    CHECK(captured.out.find(hosts.address(0)) != std::string::npos);  // runs inside the namespace

    ExecOptions with_stdin;
    with_stdin.stdin_data = std::string(300000, 'x') + "end";
    auto cat = s.exec("wc -c", with_stdin);
    CHECK(trim(cat.out) == "300003");

    // A command that stops reading its input early does not hang the writer.
    ExecOptions big;
    big.stdin_data = std::string(8u << 20, 'y');
    big.timeout = std::chrono::seconds(30);
    CHECK(s.exec("head -c 5", big).out == "yyyyy");
    // Nor one that writes a lot before reading its input.
    CHECK(trim(s.exec("head -c 3000000 /dev/zero | wc -c >&2; wc -c", big).out) == "8388608");

    auto killed = s.exec("kill -9 $$");
    CHECK(killed.exit_status == -1);
    CHECK(killed.exit_signal == "KILL");

    // Many lines, from several threads at once on the one session.
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            try {
                int lines = 0;
                ExecOptions o;
                o.on_stdout = [&](std::string_view l) {
                    if (l != std::to_string(lines + 1)) ++failures;
                    ++lines;
                };
                auto res = s.exec("seq 1 20000; exit " + std::to_string(t), o);
                if (res.exit_status != t || lines != 20000) ++failures;
            } catch (...) {
                ++failures;
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == 0);

    ExecOptions quick;
    quick.timeout = milliseconds(300);
    auto t0 = Clock::now();
    CHECK_THROWS_AS(s.exec("sleep 20", quick), sky::TimeoutError);
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    CHECK(s.exec("echo still alive").out == "still alive\n");
}

TEST_CASE("ssh: host keys are pinned", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);

    SECTION("a wrong fingerprint is refused, naming both") {
        auto o = options_for(hosts, 0);
        o.host_key = HostKeyPin::fingerprint(hosts.host_key_fingerprint(1));
        o.connect_attempts = 3;
        auto t0 = Clock::now();
        try {
            Session s(o);
            FAIL("connected despite a wrong host key");
        } catch (const HostKeyMismatch& e) {
            std::string what = e.what();
            CHECK(what.find(hosts.host_key_fingerprint(1)) != std::string::npos);
            CHECK(what.find(hosts.host_key_fingerprint(0)) != std::string::npos);
            CHECK(what.find(hosts.address(0)) != std::string::npos);
            CHECK(e.actual() == hosts.host_key_fingerprint(0));
            CHECK(e.expected() == std::vector<std::string>{hosts.host_key_fingerprint(1)});
        }
        CHECK(Clock::now() - t0 < std::chrono::seconds(3));  // not retried
    }
    SECTION("the public key and known_hosts pins accept the right key") {
        auto o = options_for(hosts, 1);
        o.host_key = HostKeyPin::public_key(hosts.host_public_key(1));
        CHECK(Session(o).exec("true").exit_status == 0);
        o.host_key = HostKeyPin::known_hosts(hosts.known_hosts_file());
        CHECK(Session(o).exec("true").exit_status == 0);
        CHECK(fingerprint_of_public_key(hosts.known_hosts_line(1)) ==
              hosts.host_key_fingerprint(1));
        // Hashed entries (`ssh-keygen -H`, HashKnownHosts) match too.
        auto hashed = hosts.dir() / "hashed_known_hosts";
        std::filesystem::copy_file(hosts.known_hosts_file(), hashed);
        auto r = sky::test::run_command({"ssh-keygen", "-q", "-H", "-f", hashed.string()});
        REQUIRE(r.status == 0);
        std::ifstream in(hashed);
        std::string first;
        std::getline(in, first);
        REQUIRE(first.rfind("|1|", 0) == 0);
        o.host_key = HostKeyPin::known_hosts(hashed);
        CHECK(Session(o).exec("true").exit_status == 0);
    }
    SECTION("a known_hosts file without the host is a mismatch") {
        auto file = hosts.dir() / "other_known_hosts";
        std::ofstream(file) << hosts.known_hosts_line(1) << "\n";
        auto o = options_for(hosts, 0);
        o.host_key = HostKeyPin::known_hosts(file);
        CHECK_THROWS_AS(Session(o), HostKeyMismatch);
        // The right key under another name does not count either.
        std::ofstream(file) << "10.255.255.1 " << hosts.host_public_key(0) << "\n";
        CHECK_THROWS_AS(Session(o), HostKeyMismatch);
    }
    SECTION("no pin is refused; accepting any key must be asked for") {
        auto o = options_for(hosts, 0);
        o.host_key = {};
        CHECK_THROWS_AS(Session(o), SshError);
        o.host_key = HostKeyPin::insecure_accept_any();
        Session s(o);
        CHECK(s.host_key_fingerprint() == hosts.host_key_fingerprint(0));
    }
    SECTION("a key the server does not know is refused") {
        auto other = hosts.dir() / "other_client";
        auto r = sky::test::run_command(
            {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other.string()});
        REQUIRE(r.status == 0);
        auto o = options_for(hosts, 0);
        o.private_key_file = other;
        CHECK_THROWS_AS(Session(o), AuthenticationError);
        // The key from memory works like the file.
        std::ifstream in(hosts.client_key_path());
        o.private_key = std::string(std::istreambuf_iterator<char>(in), {});
        o.private_key_file.clear();
        CHECK(Session(o).exec("true").exit_status == 0);
    }
}

TEST_CASE("ssh: upload files and buffers with their mode", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));

    auto data = random_bytes((3u << 20) + 12345, 42);
    auto local = hosts.dir() / "payload.bin";
    {
        std::ofstream f(local, std::ios::binary);
        f.write(reinterpret_cast<const char*>(data.data()),
                static_cast<std::streamsize>(data.size()));
    }
    // In the host's private home (absolute, as the bootstrap will use).
    std::string remote = "/root/sky-upload";
    s.upload(local, remote, 0750);
    auto r = s.exec("stat -c '%a %s' " + remote + " && sha256sum " + remote);
    REQUIRE(r.exit_status == 0);
    CHECK(r.out.rfind("750 " + std::to_string(data.size()) + "\n", 0) == 0);
    CHECK(r.out.find(sha256_hex(data)) != std::string::npos);

    // Overwriting truncates and takes the new mode exactly (no umask).
    s.upload(std::string_view("hello\n"), remote, 0600);
    r = s.exec("stat -c %a " + remote + "; cat " + remote + "; rm -f " + remote);
    CHECK(r.out == "600\nhello\n");

    s.upload(std::string_view(""), remote + ".empty", 0644);
    CHECK(trim(s.exec("stat -c %s " + remote + ".empty").out) == "0");

    CHECK_THROWS_AS(s.upload(std::string_view("x"), "/nonexistent-dir/file", 0644), ChannelError);
    CHECK(s.exec("echo ok").out == "ok\n");  // the session survives an SFTP error
}

TEST_CASE("ssh: tunnels carry bytes both ways", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    long echo_pid = start_echo_server(s, 7100);

    auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7100));
    CHECK(t->describe().find("127.0.0.1:7100") != std::string::npos);
    // Small exchange, with gathered buffers.
    std::string a = "hello ", b = "tunnel";
    std::span<const std::byte> bufs[] = {std::as_bytes(std::span(a)), std::as_bytes(std::span(b))};
    t->write_all(bufs);
    std::string got;
    std::byte buf[64];
    while (got.size() < 12) {
        auto n = t->read_some(buf);
        REQUIRE(n > 0);
        got.append(reinterpret_cast<const char*>(buf), n);
    }
    CHECK(got == "hello tunnel");

    // Several MiB through three tunnels at once, while exec runs on the same session.
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int k = 0; k < 3; ++k) {
        threads.emplace_back([&, k] {
            try {
                auto tk = blocking_transport(s.open_tunnel("127.0.0.1", 7100));
                auto data = random_bytes(6u << 20, 100 + static_cast<unsigned>(k));
                auto back = echo_through(*tk, data, 100000 + 7919 * static_cast<std::size_t>(k));
                if (back != data) ++failures;
            } catch (const std::exception& e) {
                UNSCOPED_INFO("tunnel " << k << ": " << e.what());
                ++failures;
            }
        });
    }
    threads.emplace_back([&] {
        try {
            auto blob = random_bytes(8u << 20, 99);
            s.upload(std::span<const std::byte>(blob), "concurrent.bin", 0644);
            auto r = s.exec("sha256sum concurrent.bin; rm -f concurrent.bin");
            if (r.out.find(sha256_hex(blob)) == std::string::npos) ++failures;
        } catch (const std::exception& e) {
            UNSCOPED_INFO("upload: " << e.what());
            ++failures;
        }
    });
    for (int i = 0; i < 5; ++i)
        CHECK(s.exec("echo " + std::to_string(i)).out == std::to_string(i) + "\n");
    for (auto& th : threads) th.join();
    CHECK(failures == 0);

    // The remote end closing shows as end of stream; shutdown ends a blocked read.
    auto t2 = blocking_transport(s.open_tunnel("127.0.0.1", 7100));
    std::thread closer([&] {
        std::this_thread::sleep_for(milliseconds(200));
        t2->shutdown();
    });
    auto t0 = Clock::now();
    CHECK(t2->read_some(buf) == 0);
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    closer.join();

    // The worker dying shows as end of stream on its tunnel, not as a session failure.
    auto t3 = blocking_transport(s.open_tunnel("127.0.0.1", 7100));
    CHECK(s.exec("kill -KILL " + std::to_string(echo_pid)).exit_status == 0);
    t0 = Clock::now();
    CHECK(t3->read_some(buf) == 0);
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    std::span<const std::byte> more[] = {std::as_bytes(std::span(a))};
    CHECK_THROWS_AS(t3->write_all(more), ChannelError);

    // Nothing listening: the server refuses the channel, the session lives on.
    CHECK_THROWS_AS(s.open_tunnel("127.0.0.1", 7199), ChannelError);
    CHECK(s.exec("echo fine").out == "fine\n");
}

TEST_CASE("ssh: connecting where nothing answers fails in bounded time", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    SECTION("silence: timed out") {
        auto o = options_for(hosts, 0);
        o.host = hosts.unused_address();
        o.connect_timeout = milliseconds(500);
        o.connect_attempts = 2;
        o.retry_delay = milliseconds(100);
        auto t0 = Clock::now();
        try {
            Session s(o);
            FAIL("connected to an unused address");
        } catch (const ConnectError& e) {
            CHECK(e.timed_out());
            CHECK(std::string(e.what()).find(hosts.unused_address()) != std::string::npos);
        }
        auto took = Clock::now() - t0;
        CHECK(took >= milliseconds(1000));
        CHECK(took < std::chrono::seconds(4));
    }
    SECTION("refused: fails fast, after the retries") {
        auto o = options_for(hosts, 0);
        o.port = 2222;
        o.connect_attempts = 3;
        o.retry_delay = milliseconds(50);
        auto t0 = Clock::now();
        try {
            Session s(o);
            FAIL("connected to a closed port");
        } catch (const ConnectError& e) {
            CHECK_FALSE(e.timed_out());
            CHECK(std::string(e.what()).find("refused") != std::string::npos);
        }
        CHECK(Clock::now() - t0 < std::chrono::seconds(2));
    }
}

TEST_CASE("ssh: killing sshd mid-session gives a clean error", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    Session s(options_for(hosts, 0));
    Session other(options_for(hosts, 1));
    start_echo_server(s, 7100);
    auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7100));

    std::exception_ptr exec_error;
    std::thread runner([&] {
        try {
            s.exec("sleep 60");
        } catch (...) {
            exec_error = std::current_exception();
        }
    });
    std::exception_ptr read_error;
    std::size_t read_result = 1;
    std::thread reader([&] {
        try {
            std::byte b[16];
            read_result = t->read_some(b);
        } catch (...) {
            read_error = std::current_exception();
        }
    });
    std::this_thread::sleep_for(milliseconds(300));
    auto t0 = Clock::now();
    hosts.kill_sshd(0);
    runner.join();
    reader.join();
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    REQUIRE(exec_error);
    CHECK_THROWS_AS(std::rethrow_exception(exec_error), ConnectionLost);
    CHECK((read_error != nullptr || read_result == 0));
    if (read_error) CHECK_THROWS_AS(std::rethrow_exception(read_error), ConnectionLost);
    CHECK_FALSE(s.alive());
    CHECK_THROWS_AS(s.exec("true"), ConnectionLost);
    std::byte b[4];
    std::span<const std::byte> bufs[] = {std::span<const std::byte>(b)};
    CHECK_THROWS_AS(t->write_all(bufs), sky::Error);
    // The other node is untouched.
    CHECK(other.exec("echo up").out == "up\n");
}

TEST_CASE("ssh: a silent network partition is detected", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto o = options_for(hosts, 0);
    o.keepalive_interval = std::chrono::seconds(1);
    Session s(o);
    CHECK(s.exec("echo up").out == "up\n");
    std::exception_ptr exec_error;
    std::thread runner([&] {
        try {
            s.exec("sleep 60");
        } catch (...) {
            exec_error = std::current_exception();
        }
    });
    std::this_thread::sleep_for(milliseconds(200));
    hosts.set_link_up(0, false);  // no FIN, no RST: packets just vanish
    auto t0 = Clock::now();
    runner.join();
    auto took = Clock::now() - t0;
    CHECK(took < std::chrono::seconds(15));
    REQUIRE(exec_error);
    CHECK_THROWS_AS(std::rethrow_exception(exec_error), ConnectionLost);
    CHECK_FALSE(s.alive());
}

TEST_CASE("test hosts: nothing is left behind", "[ssh][e2e][hosts]") {
    SKIP_WITHOUT_HOSTS();
    std::vector<std::string> netns;
    std::filesystem::path dir;
    {
        TestHosts hosts(3);
        for (int i = 0; i < hosts.size(); ++i) netns.push_back(hosts.netns(i));
        dir = hosts.dir();
        Session s(options_for(hosts, 2));
        s.exec("nohup sleep 300 >/dev/null 2>&1 &");
        CHECK(std::filesystem::exists("/run/netns/" + netns[0]));
    }
    for (const auto& n : netns) CHECK_FALSE(std::filesystem::exists("/run/netns/" + n));
    CHECK_FALSE(std::filesystem::exists(dir));
    auto links = sky::test::run_command({"ip", "-o", "link", "show"});
    // This run's names embed the netns tag; none of its links may remain.
    std::string tag = netns[0].substr(4, netns[0].size() - 4 - 2);
    CHECK(links.output.find(tag) == std::string::npos);
}

TEST_CASE("ssh: a host without sftp gets its uploads through exec, in bounded time and CPU",
          "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1, {.sftp = false});
    Session s(options_for(hosts, 0));
    auto cpu = [] {
        timespec ts{};
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    };
    const double c0 = cpu();
    const auto t0 = Clock::now();
    auto data = random_bytes((5u << 20) + 777, 7);
    auto local = hosts.dir() / "payload.bin";
    {
        std::ofstream f(local, std::ios::binary);
        f.write(reinterpret_cast<const char*>(data.data()),
                static_cast<std::streamsize>(data.size()));
    }
    const std::string remote = "/root/sky-upload";
    s.upload(local, remote, 0750);
    auto r = s.exec("stat -c '%a %s' " + remote + " && sha256sum " + remote);
    REQUIRE(r.exit_status == 0);
    CHECK(r.out.rfind("750 " + std::to_string(data.size()) + "\n", 0) == 0);
    CHECK(r.out.find(sha256_hex(data)) != std::string::npos);
    // Overwrites truncate and take the mode exactly; odd names survive the shell.
    s.upload(std::string_view("hello\n"), remote, 0600);
    CHECK(s.exec("stat -c %a " + remote + "; cat " + remote).out == "600\nhello\n");
    const std::string odd = "/root/it's a $(name) `x`";
    s.upload(std::string_view(""), odd, 0644);
    CHECK(trim(s.exec("stat -c %s \"/root/it's a \\$(name) \\`x\\`\"").out) == "0");
    // Nothing half-written is left beside the files.
    CHECK(trim(s.exec("ls -a /root | grep -c sky-part || true").out) == "0");
    // A failure names the file and the reason, and the session goes on.
    try {
        s.upload(std::string_view("x"), "/nonexistent-dir/file", 0644);
        FAIL("no error");
    } catch (const ChannelError& e) {
        CHECK_THAT(e.what(), Catch::Contains("/nonexistent-dir/file"));
    }
    CHECK(s.exec("echo ok").out == "ok\n");
    CHECK(Clock::now() - t0 < std::chrono::seconds(30));
    CHECK(cpu() - c0 < 5.0);  // no spinning on the refused subsystem
}

TEST_CASE("ssh: an idle session does not spin", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    start_echo_server(s, 7100);
    auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7100));
    std::thread reader([&] {
        std::byte b[16];
        t->read_some(b);
    });
    auto cpu = [] {
        timespec ts{};
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    };
    double c0 = cpu();
    std::this_thread::sleep_for(milliseconds(1500));
    double used = cpu() - c0;
    t->shutdown();
    reader.join();
    CHECK(used < 0.2);  // seconds of CPU over 1.5 s of waiting
}

// Not run by default: `sky_test_ssh "[.bench]"` compares the tunnel with OpenSSH's `ssh -L`,
// both to the same echo server, interleaved, best of three.
TEST_CASE("ssh: tunnel throughput and round trip against ssh -L", "[.bench]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto o = options_for(hosts, 0);
    if (const char* c = std::getenv("SKY_BENCH_CIPHERS")) o.ciphers = c;
    if (const char* m = std::getenv("SKY_BENCH_MACS")) o.macs = m;
    if (const char* w = std::getenv("SKY_BENCH_WINDOW")) {
        o.tunnel_window = static_cast<std::uint32_t>(std::stoul(w));
    }
    Session s(o);
    NetnsEchoServer echo(hosts, 0, 7200);

    auto data = random_bytes(64u << 20, 7);
    auto measure = [&](sky::detail::Transport& t) {
        echo_through(t, std::vector<std::byte>(data.begin(), data.begin() + (1 << 20)), 1 << 16);
        auto t0 = Clock::now();
        auto back = echo_through(t, data, 1 << 18);
        double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        REQUIRE(back.size() == data.size());
        REQUIRE(std::memcmp(back.data(), data.data(), data.size()) == 0);
        std::byte one[1] = {std::byte{1}};
        std::span<const std::byte> bufs[] = {std::span<const std::byte>(one)};
        constexpr int kRounds = 3000;
        auto r0 = Clock::now();
        for (int i = 0; i < kRounds; ++i) {
            t.write_all(bufs);
            std::byte b[1];
            REQUIRE(t.read_some(b) == 1);
        }
        double rtt_us =
            std::chrono::duration<double, std::micro>(Clock::now() - r0).count() / kRounds;
        double mbps = 2.0 * static_cast<double>(data.size()) / secs / 1e6;
        return std::pair{mbps, rtt_us};
    };

    // OpenSSH's own forwarding, same host, same echo server.
    std::uint16_t local_port = static_cast<std::uint16_t>(20000 + ::getpid() % 20000);
    std::string known = hosts.known_hosts_file().string();
    pid_t pid = ::fork();
    if (pid == 0) {
        std::string fwd = std::to_string(local_port) + ":127.0.0.1:7200";
        std::string kh = "UserKnownHostsFile=" + known;
        std::string key = hosts.client_key_path().string();
        std::string dest = "root@" + hosts.address(0);
        ::execlp("ssh", "ssh", "-N", "-L", fwd.c_str(), "-o", kh.c_str(), "-o",
                 "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o",
                 "ExitOnForwardFailure=yes", "-i", key.c_str(), dest.c_str(), nullptr);
        ::_exit(127);
    }
    REQUIRE(pid > 0);
    struct Killer {
        pid_t pid;
        ~Killer() {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    } killer{pid};
    // A plain TCP transport to the forwarded port.
    struct TcpTransport : sky::detail::Transport {
        int fd = -1;
        ~TcpTransport() override { ::close(fd); }
        std::size_t read_some(std::span<std::byte> b) override {
            auto n = ::recv(fd, b.data(), b.size(), 0);
            if (n < 0) throw sky::Error("recv failed");
            return static_cast<std::size_t>(n);
        }
        void write_all(std::span<const std::span<const std::byte>> bufs) override {
            for (auto b : bufs) {
                std::size_t off = 0;
                while (off < b.size()) {
                    auto n = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
                    if (n <= 0) throw sky::Error("send failed");
                    off += static_cast<std::size_t>(n);
                }
            }
        }
        void shutdown() noexcept override { ::shutdown(fd, SHUT_RDWR); }
        std::string describe() const override { return "tcp"; }
    };
    auto connect_forward = [&] {
        auto tcp = std::make_unique<TcpTransport>();
        for (int i = 0; i < 100 && tcp->fd < 0; ++i) {
            int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            sockaddr_in sa{};
            sa.sin_family = AF_INET;
            sa.sin_port = htons(local_port);
            sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
                int one = 1;
                ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                tcp->fd = fd;
            } else {
                ::close(fd);
                std::this_thread::sleep_for(milliseconds(50));
            }
        }
        REQUIRE(tcp->fd >= 0);
        return tcp;
    };
    std::pair<double, double> ours{0, 1e9}, theirs{0, 1e9};
    for (int rep = 0; rep < 3; ++rep) {
        {
            auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7200));
            auto m = measure(*t);
            ours = {std::max(ours.first, m.first), std::min(ours.second, m.second)};
        }
        {
            auto t = connect_forward();
            auto m = measure(*t);
            theirs = {std::max(theirs.first, m.first), std::min(theirs.second, m.second)};
        }
    }
    WARN("libssh2 tunnel: " << ours.first << " MB/s echoed (both directions), round trip "
                            << ours.second << " us");
    WARN("ssh -L:         " << theirs.first << " MB/s echoed (both directions), round trip "
                            << theirs.second << " us");
    WARN("throughput ratio " << ours.first / theirs.first << " (target >= 0.7), round trip ratio "
                             << ours.second / theirs.second << " (target <= 1.3)");
}
