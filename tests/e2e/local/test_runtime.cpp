// The runtime on Local: events, remote output, process lifetime, a hostile peer.
#include <poll.h>
#include <pty.h>  // defines B200: sky.hpp must cope
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "e2e/local/functions.hpp"
#include "e2e/local/wire.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"

using namespace e2e;

extern char** environ;

TEST_CASE("pool events arrive in order with remote output as LogLine", "[local][events]") {
    std::mutex m;
    std::vector<std::string> kinds;
    std::vector<sky::LogLine> lines;
    {
        sky::ComputePool pool{
            {.nodes = 2,
             .display = sky::Display::quiet,
             .on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
                 std::lock_guard lk(m);
                 std::visit(
                     [&](auto& ev) {
                         using T = std::decay_t<decltype(ev)>;
                         if constexpr (std::is_same_v<T, sky::PoolStarted>)
                             kinds.push_back("started");
                         else if constexpr (std::is_same_v<T, sky::PoolStopping>)
                             kinds.push_back("stopping");
                         else if constexpr (std::is_same_v<T, sky::InstanceStopping>)
                             kinds.push_back("instance-stopping");
                         else if constexpr (std::is_same_v<T, sky::LogLine>)
                             lines.push_back(ev);
                     },
                     e);
                 return std::nullopt;
             }}};
        int per_node = 0;
        pool.on<sky::LogLine>([&](const sky::LogLine&) { ++per_node; });
        CHECK((sky::compute<say_and_return>(50) >> pool) == 50);
        CHECK((sky::compute<printf_lines>(5) >> pool) == 5);
    }
    std::lock_guard lk(m);
    REQUIRE(kinds.size() >= 4);
    CHECK(kinds.front() == "started");
    CHECK(kinds[1] == "stopping");
    CHECK(std::count(kinds.begin(), kinds.end(), "instance-stopping") == 2);
    // 50 lines from std::cout in order, one from std::cerr, 5 from printf (fd level).
    std::vector<std::string> cout_lines;
    int printf_seen = 0;
    for (auto& l : lines) {
        if (l.line.rfind("line ", 0) == 0) cout_lines.push_back(l.line);
        if (l.line.rfind("printf ", 0) == 0) ++printf_seen;
        CHECK(l.timestamp > 1.6e9);
        CHECK_FALSE(l.instance_id.empty());
    }
    REQUIRE(cout_lines.size() == 50);
    for (int i = 0; i < 50; ++i)
        CHECK(cout_lines[static_cast<std::size_t>(i)] == "line " + std::to_string(i));
    CHECK(printf_seen == 5);
    CHECK(std::count_if(lines.begin(), lines.end(),
                        [](auto& l) { return l.line == "to stderr"; }) == 1);
}

TEST_CASE("log display prints remote output with a [node N] prefix", "[local][events]") {
    // Capture this process's stderr while a pool in log mode runs.
    char path[] = "/tmp/sky-e2e-stderr-XXXXXX";
    int fd = ::mkstemp(path);
    int saved = ::dup(2);
    ::dup2(fd, 2);
    {
        sky::ComputePool pool{{.nodes = 1, .display = sky::Display::log}};
        sky::compute<say_and_return>(2) >> pool;
    }
    ::dup2(saved, 2);
    ::close(saved);
    ::close(fd);
    std::ifstream f(path);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    ::unlink(path);
    CHECK(text.find("[node 0] line 0\n[node 0] line 1\n") != std::string::npos);
    CHECK(text.find("sky: pool") != std::string::npos);
    CHECK(text.find("stopping") != std::string::npos);
}

TEST_CASE("use_callback sees a pool's events", "[local][events]") {
    std::atomic<int> started{0};
    auto guard = sky::use_callback([&](const sky::Event& e) -> std::optional<sky::Event> {
        if (std::holds_alternative<sky::PoolStarted>(e)) ++started;
        return std::nullopt;
    });
    { sky::ComputePool pool{{.nodes = 1, .display = sky::Display::quiet}}; }
    CHECK(started == 1);
}

namespace {
bool alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0; }
std::string self_exe() {
    char buf[4096];
    auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return std::string(buf, static_cast<std::size_t>(n > 0 ? n : 0));
}
}  // namespace

TEST_CASE("workers die with their client, even on SIGKILL", "[local][lifetime]") {
    TempDir d;
    std::string pid_file = d.path + "/pids";
    std::string exe = self_exe();
    char* argv[] = {exe.data(), const_cast<char*>("--orphan-client"), pid_file.data(), nullptr};
    pid_t client = 0;
    REQUIRE(::posix_spawn(&client, exe.c_str(), nullptr, nullptr, argv, environ) == 0);
    std::vector<long> pids;
    for (int i = 0; i < 1000 && pids.size() < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::ifstream f(pid_file);
        long p;
        pids.clear();
        while (f >> p) pids.push_back(p);
    }
    REQUIRE(pids.size() == 2);
    for (long p : pids) CHECK(alive(p));
    ::kill(client, SIGKILL);
    int st;
    ::waitpid(client, &st, 0);
    bool gone = false;
    for (int i = 0; i < 300 && !gone; ++i) {
        gone = !alive(pids[0]) && !alive(pids[1]);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(gone);
    for (long p : pids)
        if (alive(p)) ::kill(static_cast<pid_t>(p), SIGKILL);
}

TEST_CASE("a worker fed garbage closes the connection and exits, without a crash",
          "[local][lifetime]") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    std::string exe = self_exe();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    std::vector<std::string> env_s = {"SKY_WORKER_FD=3", "SKY_WORKER_TOKEN=t0k"};
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {exe.data(), const_cast<char*>("--sky-worker"), nullptr};
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, envp.data()) == 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    // Authenticate, read its hello, answer with a proper hello, then send garbage.
    sky::detail::FdTransport t(sv[0], "test worker");
    std::unique_ptr<sky::detail::FrameReader> r;
    e2e::wire::connect_client(t, r, "t0k");
    sky::detail::Buffer frame;
    const char junk[] = "this is not a frame header at all.......";
    frame.append(junk, sizeof junk);
    std::span<const std::byte> one[] = {frame.span()};
    t.write_all(one);
    int st = 0;
    pid_t r2 = 0;
    for (int i = 0; i < 500 && r2 == 0; ++i) {
        r2 = ::waitpid(pid, &st, WNOHANG);
        if (r2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (r2 == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &st, 0);
    }
    REQUIRE(r2 == pid);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 4);  // "closing the connection: bad frame magic"
}

TEST_CASE("workers sample metrics when collect_metrics is on", "[local][events]") {
    ::setenv("SKY_METRICS_INTERVAL_MS", "100", 1);
    std::mutex m;
    std::vector<sky::Metrics> seen;
    std::map<int, std::string> instance_of;  // node -> its instance id
    {
        sky::ComputePool pool{{.nodes = 2, .display = sky::Display::quiet}};
        for (auto& i : pool.instances()) instance_of[i.node] = i.id;
        pool.on<sky::Metrics>([&](const sky::Metrics& x) {
            std::lock_guard lk(m);
            seen.push_back(x);
        });
        // Samples every 100 ms: both nodes report well within 3 s.
        for (int i = 0; i < 300; ++i) {
            {
                std::lock_guard lk(m);
                std::set<int> nodes;
                for (auto& x : seen) nodes.insert(x.node);
                if (nodes.size() == 2) break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    {
        sky::ComputePool off{
            {.nodes = 1, .display = sky::Display::quiet, .collect_metrics = false}};
        int count = 0;
        off.on<sky::Metrics>([&](const sky::Metrics&) { ++count; });
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        CHECK(count == 0);
    }
    ::unsetenv("SKY_METRICS_INTERVAL_MS");
    std::lock_guard lk(m);
    REQUIRE(instance_of.size() == 2);
    std::set<int> reported;
    for (auto& x : seen) {
        reported.insert(x.node);
        CHECK(x.memory_total_mb > 0);
        CHECK(x.memory_percent > 0);
        CHECK(x.memory_percent <= 100);
        CHECK(x.cpu_percent >= 0);
        // Each sample names the node it came from and that node's instance.
        REQUIRE(instance_of.count(x.node) == 1);
        CHECK(x.instance_id == instance_of[x.node]);
    }
    CHECK(reported == std::set<int>{0, 1});  // every node, not just one
}

TEST_CASE("a worker can listen on loopback TCP (as remote workers do) and serve a call",
          "[local][lifetime]") {
    TempDir d;
    std::string exe = self_exe();
    std::string port_file = d.path + "/port";
    std::vector<std::string> env_s = {"SKY_WORKER_LISTEN=127.0.0.1:0", "SKY_WORKER_TOKEN=tok",
                                      "SKY_WORKER_PORT_FILE=" + port_file,
                                      "SKY_WORKER_ACCEPT_TIMEOUT=20"};
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {exe.data(), const_cast<char*>("--sky-worker"), nullptr};
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
    int port = 0;
    for (int i = 0; i < 500 && port == 0; ++i) {
        std::ifstream f(port_file);
        if (!(f >> port)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(port > 0);
    int fd = sky::detail::connect_tcp("127.0.0.1", port, std::chrono::seconds(5));
    sky::detail::FdTransport t(fd, "tcp worker");
    std::unique_ptr<sky::detail::FrameReader> rp;
    sky::detail::WorkerHello wh = e2e::wire::connect_client(t, rp, "tok");
    CHECK(wh.build_id == sky::detail::self_build_id());
    auto& r = *rp;
    sky::detail::Frame f;
    sky::detail::Buffer frame;
    auto call = sky::compute<add>(2, 3);
    sky::detail::Buffer cp;
    sky::detail::append_call_header(cp, call.function_name(), call.desc().signature);
    cp.append(call.desc().args->data(), call.desc().args->size());
    sky::detail::append_frame(frame, sky::detail::MsgType::call, 77, cp.span());
    std::span<const std::byte> one[] = {frame.span()};
    t.write_all(one);
    REQUIRE(e2e::wire::next_answer(r, f));
    CHECK(f.header.type == sky::detail::MsgType::result);
    CHECK(f.header.call_id == 77);
    int result = 0;
    sky::detail::load_from(f.payload, result);
    CHECK(result == 5);
    t.shutdown();
    int st = 0;
    ::waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
}

namespace {
// Runs `body` with this process's stderr sent to `fd`, then restores it.
template <class F>
void with_stderr(int fd, F body) {
    std::fflush(stderr);
    int saved = ::dup(2);
    ::dup2(fd, 2);
    body();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
}
std::string drain(int fd) {
    std::string out;
    char buf[4096];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) break;
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
}
}  // namespace

TEST_CASE("spinner display redraws in place in a terminal", "[local][display]") {
    int master = -1, slave = -1;
    REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
    std::string screen;
    std::thread reader([&] {
        for (int i = 0; i < 400; ++i) {
            std::string got = drain(master);
            screen += got;
            if (screen.find("summary") != std::string::npos) break;
        }
    });
    with_stderr(slave, [&] {
        sky::ComputePool pool{{.nodes = 2, .display = sky::Display::spinner}};
        sky::compute<sleep_ms>(400) >> pool;
        sky::compute<say_and_return>(1) >> pool;
    });
    reader.join();
    ::close(slave);
    ::close(master);
    CHECK(screen.find("\x1b[") != std::string::npos);           // cursor movement: in place
    CHECK(screen.find("running 1 call") != std::string::npos);  // the live state of a node
    CHECK(screen.find("[node ") != std::string::npos);          // remote output above the block
    CHECK(screen.find("summary") != std::string::npos);
}

TEST_CASE("spinner display prints plain lines when stderr is not a terminal", "[local][display]") {
    char path[] = "/tmp/sky-e2e-spinner-XXXXXX";
    int fd = ::mkstemp(path);
    with_stderr(fd, [&] {
        sky::ComputePool pool{{.nodes = 2, .display = sky::Display::spinner}};
        sky::compute<add>(1, 2) >> pool;
    });
    ::close(fd);
    std::ifstream f(path);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    ::unlink(path);
    CHECK(text.find("\x1b[") == std::string::npos);
    CHECK(text.find("node 0 (local-") != std::string::npos);
    CHECK(text.find("): ready") != std::string::npos);
    CHECK(text.find("summary") != std::string::npos);
}
