// The node side of shipping against a local user of the node (security review r4: M1, L1, L4),
// run on this machine exactly as a node runs it: the store takes only a copy whose own bytes
// hashed to its name, even while someone swaps the file between the hash and the copy; a file
// name never becomes shell text; the peer file server serves only its pool's files, counts only
// requests with the token as activity, listens on the address it is given and ends with its pool.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "runtime/worker/file_server.hpp"
#include "ship/shipment.hpp"
#include "util/digest.hpp"
#include "util/shell.hpp"

namespace fs = std::filesystem;
using namespace sky::detail::ship;
using sky::detail::sha256_hex;
using sky::detail::shell_quote;
using Clock = std::chrono::steady_clock;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "sky-ship-sec-XXXXXX").string();
        REQUIRE(::mkdtemp(t.data()));
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Ran {
    int status = -1;
    std::string out;
};

// A node command (node_scripts::node_command), run by /bin/sh as a node's login shell runs it,
// with `home` as $HOME and `in` on its standard input.
Ran run_node(const std::string& script, const fs::path& home, const std::string& in) {
    const fs::path dir = home.parent_path();
    write(dir / "stdin", in);
    const std::string cmd = "cd / && HOME=" + shell_quote(home.string()) + " timeout 60 sh -c " +
                            shell_quote(node_scripts::node_command(script)) + " < " +
                            shell_quote((dir / "stdin").string()) + " > " +
                            shell_quote((dir / "stdout").string()) + " 2>&1";
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, read(dir / "stdout")};
}

std::string bytes(char c, std::size_t n) { return std::string(n, c); }

}  // namespace

TEST_CASE("ship: a file swapped between the node's hash and its copy never enters the store",
          "[ship][security]") {
    // Review r4 M1: a user who can write the client's path of a library on the node renames
    // their own file over it the moment the node's hashing process closes it. Twenty rounds,
    // each with a fresh store; the swap comes from inotify, as fast as an attacker's would.
    const std::string genuine = bytes('g', 256 * 1024);
    const std::string evil = bytes('e', 256 * 1024);
    const std::string hash = sha256_hex(genuine);
    int swapped = 0, poisoned = 0, stored_genuine = 0;
    for (int round = 0; round < 20; ++round) {
        TempDir t;
        const fs::path home = t.path / "home", src = t.path / "src";
        fs::create_directories(home);
        fs::create_directories(src);
        const fs::path victim = src / "libvictim.so";
        write(victim, genuine);
        write(src / ".evil", evil);
        const int fd = ::inotify_init1(IN_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::inotify_add_watch(fd, victim.c_str(), IN_CLOSE_NOWRITE) >= 0);
        std::atomic<bool> did_swap{false};
        std::thread swapper([&] {
            // The first close of the file by a reader (the node's hashing process): swap.
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 30000) > 0) {
                alignas(inotify_event) char buf[4096];
                if (::read(fd, buf, sizeof buf) > 0 &&
                    ::rename((src / ".evil").c_str(), victim.c_str()) == 0)
                    did_swap = true;
            }
        });
        const Ran r =
            run_node(node_scripts::inventory((home / ".sky/prog/x").string()), home,
                     hash + "\t" + std::to_string(genuine.size()) + "\t" + victim.string() + "\n");
        swapper.join();
        ::close(fd);
        INFO(r.out);
        REQUIRE(r.status == 0);
        CHECK((r.out.find("need " + hash) != std::string::npos ||
               r.out.find("local " + hash) != std::string::npos));
        if (did_swap) ++swapped;
        const fs::path stored = home / ".sky/cas" / hash;
        if (fs::exists(stored)) {
            if (read(stored) == genuine)
                ++stored_genuine;
            else
                ++poisoned;
        }
        // Nothing half-copied is left in the store either.
        for (const auto& e : fs::directory_iterator(home / ".sky/cas"))
            CHECK(e.path().filename().string().rfind(".in-", 0) != 0);
    }
    INFO("swapped " << swapped << ", poisoned " << poisoned << ", genuine " << stored_genuine);
    CHECK(swapped == 20);  // the race was run every time
    CHECK(poisoned == 0);
}

TEST_CASE("ship: without a swap, the node's own copy of a file enters the store as before",
          "[ship][security]") {
    TempDir t;
    const fs::path home = t.path / "home";
    fs::create_directories(home);
    const std::string content = bytes('a', 4096);
    write(t.path / "liba.so", content);
    const std::string hash = sha256_hex(content);
    const std::string other = sha256_hex("not on the node");
    const Ran r = run_node(node_scripts::inventory((home / ".sky/prog/x").string()), home,
                           hash + "\t4096\t" + (t.path / "liba.so").string() + "\n" + other +
                               "\t15\t" + (t.path / "missing.so").string() + "\n");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("local " + hash) != std::string::npos);
    CHECK(r.out.find("need " + other) != std::string::npos);
    CHECK(read(home / ".sky/cas" / hash) == content);
    CHECK((fs::status(home / ".sky/cas" / hash).permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_exec));
}

TEST_CASE("ship: a file name is never shell text on the node, even when its upload is damaged",
          "[ship][security]") {
    // Review r4 L4: the name went into `echo "sky: {name} arrived damaged"`.
    TempDir t;
    const fs::path home = t.path / "home";
    fs::create_directories(home / ".sky/cas");
    const fs::path pwned = t.path / "pwned";
    ShippedFile f;
    f.name = "lib$(touch " + pwned.string() + ")`touch " + pwned.string() + "`\".so";
    f.sha256 = sha256_hex("what the client sent");
    const fs::path incoming = home / ".sky/cas/.in-damaged";
    write(incoming, "what arrived");
    Ran r = run_node(node_scripts::store_upload(f, incoming.string(), incoming.string(), false),
                     home, "");
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(r.out.find("arrived damaged") != std::string::npos);
    CHECK_FALSE(fs::exists(pwned));
    CHECK_FALSE(fs::exists(incoming));
    CHECK_FALSE(fs::exists(home / ".sky/cas" / f.sha256));
    // The same upload undamaged enters the store.
    write(incoming, "what the client sent");
    r = run_node(node_scripts::store_upload(f, incoming.string(), incoming.string(), false), home,
                 "");
    CHECK(r.status == 0);
    CHECK(read(home / ".sky/cas" / f.sha256) == "what the client sent");
    CHECK_FALSE(fs::exists(pwned));
}

namespace {

// A file server in a child process of this test, as a node starts it (the program's
// --sky-serve-files mode calls serve_files_main with these variables).
class Server {
public:
    Server(const fs::path& dir, const std::string& token, const std::vector<std::string>& list,
           const std::string& address, int lifetime = 600) {
        run_ = dir / "run";
        fs::create_directories(run_);
        write(run_ / "serve-token", token + "\n");
        std::string l;
        for (auto& h : list) l += h + "\n";
        write(run_ / "serve-list", l);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::setenv("SKY_SERVE_DIR", (dir / "cas").c_str(), 1);
            ::setenv("SKY_SERVE_TOKEN_FILE", (run_ / "serve-token").c_str(), 1);
            ::setenv("SKY_SERVE_LIST_FILE", (run_ / "serve-list").c_str(), 1);
            ::setenv("SKY_SERVE_PORT_FILE", (run_ / "serve-port").c_str(), 1);
            ::setenv("SKY_SERVE_RUN_DIR", run_.c_str(), 1);
            ::setenv("SKY_SERVE_ADDR", address.c_str(), 1);
            ::setenv("SKY_SERVE_LIFETIME", std::to_string(lifetime).c_str(), 1);
            ::setenv("SKY_SERVE_IDLE", "5", 1);
            ::_exit(sky::detail::serve_files_main());
        }
        const auto until = Clock::now() + std::chrono::seconds(10);
        while (Clock::now() < until && !fs::exists(run_ / "serve-port"))
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        REQUIRE(fs::exists(run_ / "serve-port"));
        port_ = std::stoi(read(run_ / "serve-port"));
    }
    ~Server() {
        if (pid_ > 0 && !exited_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    [[nodiscard]] int port() const { return port_; }
    [[nodiscard]] const fs::path& run_dir() const { return run_; }
    // Whether it exited within `limit`.
    bool exits_within(std::chrono::milliseconds limit) {
        const auto until = Clock::now() + limit;
        while (Clock::now() < until) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return exited_ = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

private:
    fs::path run_;
    pid_t pid_ = -1;
    int port_ = 0;
    bool exited_ = false;
};

// Connects to address:port, sends `request`, returns what came back (nullopt: refused).
std::optional<std::string> ask(const std::string& address, int port, const std::string& request) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(s);
        return std::nullopt;
    }
    timeval tv{10, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (!request.empty()) (void)::send(s, request.data(), request.size(), MSG_NOSIGNAL);
    std::string got;
    char buf[65536];
    for (ssize_t n; (n = ::recv(s, buf, sizeof buf, 0)) > 0;)
        got.append(buf, static_cast<std::size_t>(n));
    ::close(s);
    return got;
}

}  // namespace

TEST_CASE("ship: the peer file server serves only its pool's files, to the token, on its address",
          "[ship][security]") {
    TempDir t;
    fs::create_directories(t.path / "cas");
    const std::string mine = bytes('m', 100000), other = bytes('o', 5000);
    const std::string hm = sha256_hex(mine), ho = sha256_hex(other);
    write(t.path / "cas" / hm, mine);
    write(t.path / "cas" / ho, other);  // another pool's file in the same store
    const std::string token = std::string(64, 'k');
    Server s(t.path, token, {hm}, "127.0.0.2");
    // The token and its list were read and removed.
    CHECK_FALSE(fs::exists(s.run_dir() / "serve-token"));
    CHECK_FALSE(fs::exists(s.run_dir() / "serve-list"));
    CHECK(ask("127.0.0.2", s.port(), token + " " + hm + "\n") == mine);
    CHECK(ask("127.0.0.2", s.port(), token + " " + ho + "\n") == std::string());
    CHECK(ask("127.0.0.2", s.port(), std::string(64, 'x') + " " + hm + "\n") == std::string());
    // Only the given address listens.
    CHECK_FALSE(ask("127.0.0.1", s.port(), token + " " + hm + "\n").has_value());
}

TEST_CASE("ship: only requests with the token keep the peer file server alive",
          "[ship][security]") {
    TempDir t;
    fs::create_directories(t.path / "cas");
    const std::string token = std::string(64, 'k');
    Server s(t.path, token, {}, "127.0.0.1");
    // Someone without the token connects every second: the server still ends after its idle
    // time (5 s here), within a bounded wait.
    bool exited = false;
    for (int i = 0; i < 12 && !exited; ++i) {
        (void)ask("127.0.0.1", s.port(), "junk\n");
        exited = s.exits_within(std::chrono::seconds(1));
    }
    CHECK(exited);
}

TEST_CASE("ship: the peer file server ends with its pool's run directory and at its lifetime",
          "[ship][security]") {
    TempDir t;
    fs::create_directories(t.path / "cas");
    const std::string token = std::string(64, 'k');
    {
        Server s(t.path, token, {}, "127.0.0.1");
        CHECK_FALSE(s.exits_within(std::chrono::milliseconds(1500)));
        fs::remove_all(s.run_dir());  // the watchdog's, or stop()'s, rm -rf of the run directory
        CHECK(s.exits_within(std::chrono::seconds(4)));
    }
    {
        Server s(t.path, token, {}, "127.0.0.1", /*lifetime=*/2);
        bool exited = false;
        for (int i = 0; i < 6 && !exited; ++i) {
            // Authenticated requests (for a file it does not have) all along.
            (void)ask("127.0.0.1", s.port(), token + " " + std::string(64, '0') + "\n");
            exited = s.exits_within(std::chrono::seconds(1));
        }
        CHECK(exited);
    }
}

namespace {

// A connection to address:port from `source` that sends nothing (-1: refused).
int idle_connection(const std::string& source, const std::string& address, int port) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    if (::bind(s, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(s);
        return -1;
    }
    return s;
}

// Whether the server closed `fd` (its end of file arrives within `limit`).
bool closed_within(int fd, std::chrono::milliseconds limit) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
    char c;
    return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

}  // namespace

TEST_CASE(
    "ship: idle connections without the token, from one address or many, do not keep a "
    "receiver with the token out of the peer file server",
    "[ship][security]") {
    TempDir t;
    fs::create_directories(t.path / "cas");
    const std::string mine = bytes('m', 200000);
    const std::string hm = sha256_hex(mine);
    write(t.path / "cas" / hm, mine);
    const std::string token = std::string(64, 'k');
    Server s(t.path, token, {hm}, "127.0.0.1");
    std::vector<int> idle;
    // 64 from the receiver's own address, then 64 from 32 others: more than every slot the
    // server has, each sending nothing.
    for (int i = 0; i < 64; ++i)
        idle.push_back(idle_connection("127.0.0.1", "127.0.0.1", s.port()));
    for (int i = 0; i < 64; ++i)
        idle.push_back(
            idle_connection("127.0.3." + std::to_string(1 + i % 32), "127.0.0.1", s.port()));
    for (int fd : idle) REQUIRE(fd >= 0);
    // The receiver gets its file at once, three times over, while they hold on.
    for (int k = 0; k < 3; ++k) {
        const auto t0 = Clock::now();
        CHECK(ask("127.0.0.1", s.port(), token + " " + hm + "\n") == mine);
        CHECK(Clock::now() - t0 < std::chrono::seconds(1));
    }
    // Every idle one is closed by the server within its request time (2 s), not held.
    int closed = 0;
    const auto until = Clock::now() + std::chrono::seconds(3);
    for (int fd : idle)
        closed += closed_within(fd, std::max(std::chrono::milliseconds(0),
                                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 until - Clock::now())))
                      ? 1
                      : 0;
    CHECK(closed == static_cast<int>(idle.size()));
    for (int fd : idle) ::close(fd);
}
