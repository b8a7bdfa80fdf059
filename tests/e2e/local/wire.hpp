#pragma once
// Talking to a real worker process by hand: start it, run the client's side of the handshake,
// build frames, wait for it to exit. Used by the tests that play a hostile or a hand-made peer.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/auth.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/serialize.hpp"

namespace e2e::wire {

namespace d = sky::detail;

inline std::string self_exe() {
    char buf[4096];
    auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return std::string(buf, static_cast<std::size_t>(n > 0 ? n : 0));
}

/// Starts this test binary as a worker with exactly `env`; `child_fd` (if >= 0) becomes fd 3.
inline pid_t spawn_worker(std::vector<std::string> env, int child_fd = -1) {
    std::string exe = self_exe();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (child_fd >= 0) posix_spawn_file_actions_adddup2(&fa, child_fd, 3);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {exe.data(), const_cast<char*>("--sky-worker"), nullptr};
    pid_t pid = 0;
    int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
    return pid;
}

/// How a worker ended: its wait status and peak memory use (KiB). Kills it after `within`.
struct Exit {
    bool exited = false;  // on its own, within the time
    int status = 0;
    long max_rss_kib = 0;
};
inline Exit wait_exit(pid_t pid, std::chrono::milliseconds within) {
    Exit e;
    rusage ru{};
    auto until = std::chrono::steady_clock::now() + within;
    for (;;) {
        pid_t r = ::wait4(pid, &e.status, WNOHANG, &ru);
        if (r == pid) {
            e.exited = true;
            break;
        }
        if (std::chrono::steady_clock::now() > until) {
            ::kill(pid, SIGKILL);
            ::wait4(pid, &e.status, 0, &ru);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    e.max_rss_kib = ru.ru_maxrss;
    return e;
}

/// The whole file ("" when it is missing).
inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/// Waits for a listening worker's port file to be non-empty (it listens then); its text.
inline std::string wait_port_file(const std::string& path) {
    for (int i = 0; i < 1000; ++i) {
        if (std::string s = read_file(path); !s.empty()) return s;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("the worker never wrote its port file");
    return {};
}

/// Appends a whole frame to `out`.
inline void frame(d::Buffer& out, d::MsgType type, std::uint64_t id, const d::Buffer& payload) {
    d::append_frame(out, type, id, payload.span());
}
inline void send(d::Transport& t, const d::Buffer& b) {
    std::span<const std::byte> one[] = {b.span()};
    t.write_all(one);
}

/// The client's side of a connection, as the pool does it: authenticate, read the worker's
/// hello, send a client hello, read the worker's ready frame. Returns the worker's hello.
inline d::WorkerHello connect_client(d::Transport& t, std::unique_ptr<d::FrameReader>& r,
                                     const std::string& token, const d::ClientHello& ch = {}) {
    r = std::make_unique<d::FrameReader>(t, d::auth_max_frame);
    d::client_authenticate(t, *r, token, std::chrono::seconds(10));
    r = std::make_unique<d::FrameReader>(std::move(*r), d::default_max_frame);
    d::Frame f;
    REQUIRE(r->next(f));
    REQUIRE(f.header.type == d::MsgType::hello);
    d::WorkerHello wh;
    d::load_from(f.payload, wh);
    d::Buffer p, out;
    d::save_to(p, ch);
    frame(out, d::MsgType::hello, 0, p);
    send(t, out);
    // The worker is ready once it knows its worker processes (one here): a ready frame.
    REQUIRE(r->next(f));
    REQUIRE(f.header.type == d::MsgType::ready);
    return wh;
}

/// The next frame that answers or concerns a call or the connection: log lines and the
/// worker's "started" are skipped. False at the end of the stream.
inline bool next_answer(d::FrameReader& r, d::Frame& f) {
    while (r.next(f))
        if (f.header.type != d::MsgType::log && f.header.type != d::MsgType::started) return true;
    return false;
}

/// A call frame for `c` (a PendingCompute's description).
inline void call_frame(d::Buffer& out, std::uint64_t id, const d::CallDesc& c) {
    d::Buffer cp;
    d::append_call_header(cp, c.function, c.signature);
    if (c.args) cp.append(c.args->data(), c.args->size());
    frame(out, d::MsgType::call, id, cp);
}

}  // namespace e2e::wire
