#include "util/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "sky/errors.hpp"

extern char** environ;

namespace sky::detail {

namespace {

using Clock = std::chrono::steady_clock;

// A line longer than this reaches on_line in pieces: what is held stays bounded.
constexpr std::size_t kLineCap = 64u << 10;
// How long a killed program has to end (and what it wrote to be read) before it is left behind.
constexpr auto kReapGrace = std::chrono::seconds(1);

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

int status_of(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

// The started program and our ends of its pipes. Whatever way run_subprocess leaves (an
// on_line that throws too), the pipes are closed and the program is not left running.
struct Child {
    pid_t pid = -1;
    int in = -1, out = -1, err = -1;
    bool reaped = false;
    int wait_status = -1;  // from waitpid; -1 when someone else reaped it

    ~Child() {
        close_fd(in);
        close_fd(out);
        close_fd(err);
        if (pid > 0 && !reaped) {
            kill_group();
            (void)reap_within(kReapGrace);
        }
    }
    void kill_group() const {
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
    }
    bool try_reap() {
        if (reaped) return true;
        int st = 0;
        const pid_t w = ::waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            reaped = true;
            wait_status = st;
        } else if (w < 0 && errno == ECHILD) {
            reaped = true;  // SIGCHLD ignored: the kernel reaped it, its status is gone
        }
        return reaped;
    }
    bool reap_within(std::chrono::milliseconds grace) {
        const auto until = Clock::now() + grace;
        while (!try_reap()) {
            if (Clock::now() >= until) return false;
            ::usleep(5000);
        }
        return true;
    }
};

// Writing to the stdin of a program that has already ended raises SIGPIPE, whose default action
// would end this process: it is held back on this thread while run_subprocess writes, and one
// that came meanwhile is taken off (the write's EPIPE says enough).
class SigpipeHeld {
public:
    SigpipeHeld() {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigemptyset(&pending);
        was_pending_ = ::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
        ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    }
    ~SigpipeHeld() {
        if (!was_pending_) {
            const timespec none{0, 0};
            while (::sigtimedwait(&pipe_, nullptr, &none) == SIGPIPE) {
            }
        }
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeHeld(const SigpipeHeld&) = delete;
    SigpipeHeld& operator=(const SigpipeHeld&) = delete;

private:
    sigset_t pipe_{}, old_{};
    bool was_pending_ = false;
};

}  // namespace

SubprocessResult run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& o) {
    if (argv.empty()) throw Error("run_subprocess: no program given");
    SubprocessResult r;
    // The environment: ours (unless told otherwise), with `env` replacing or adding variables.
    std::vector<std::string> envs;
    auto name_of = [](std::string_view e) { return e.substr(0, e.find('=')); };
    for (char** e = o.inherit_env ? environ : nullptr; e && *e; ++e) {
        const std::string_view entry(*e);
        bool replaced = false;
        for (const auto& x : o.env) replaced = replaced || name_of(x) == name_of(entry);
        if (!replaced) envs.emplace_back(entry);
    }
    envs.insert(envs.end(), o.env.begin(), o.env.end());
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args(argv);
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    Child c;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    auto close_all = [&] {
        for (int* p : {in, out, err})
            for (int k = 0; k < 2; ++k) close_fd(p[k]);
    };
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
        (!o.merge_stderr && ::pipe2(err, O_CLOEXEC) != 0)) {
        r.errors = std::string("cannot make a pipe: ") + std::strerror(errno);
        close_all();
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, o.merge_stderr ? out[1] : err[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A group of its own: a timeout ends whatever it started too.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, argp[0], &fa, &attr, argp.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        r.errors = "cannot start " + argv[0] + ": " + std::strerror(rc);
        close_all();
        return r;
    }
    c.pid = pid;
    c.in = std::exchange(in[1], -1);
    c.out = std::exchange(out[0], -1);
    c.err = std::exchange(err[0], -1);
    close_all();  // the child's ends
    ::fcntl(c.in, F_SETFL, O_NONBLOCK);
    if (o.stdin_data.empty()) close_fd(c.in);
    std::optional<SigpipeHeld> sigpipe;
    if (c.in >= 0) sigpipe.emplace();

    std::string partial;  // stdout since its last newline, for on_line
    auto keep = [&](std::string& to, const char* data, std::size_t n) {
        const std::size_t room = o.output_cap > to.size() ? o.output_cap - to.size() : 0;
        if (n > room) r.truncated = true;
        to.append(data, std::min(n, room));
    };
    auto lines = [&](const char* data, std::size_t n) {
        if (!o.on_line) return;
        partial.append(data, n);
        std::size_t start = 0;
        for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
            o.on_line(std::string_view(partial).substr(start, nl - start));
        partial.erase(0, start);
        while (partial.size() >= kLineCap) {
            o.on_line(std::string_view(partial).substr(0, kLineCap));
            partial.erase(0, kLineCap);
        }
    };

    const auto deadline = Clock::now() + o.timeout;
    auto drain_until = Clock::time_point::max();
    std::size_t written = 0;
    bool exited = false, killed = false;
    for (;;) {
        // Once the program itself has ended, what is already in the pipes is read and the rest
        // ignored: a process it left running (a daemon it started) may hold them open.
        if (!exited && c.try_reap()) exited = true;
        const auto now = Clock::now();
        if (!exited && !killed) {
            const bool cancel = o.cancel && o.cancel->load();
            if (cancel || now >= deadline) {
                c.kill_group();
                killed = true;
                (cancel ? r.cancelled : r.timed_out) = true;
                // What it wrote before it died is still read, for a short while.
                drain_until = now + kReapGrace;
            }
        }
        if (killed && now >= drain_until) break;
        std::vector<pollfd> fds;
        if (c.out >= 0) fds.push_back({c.out, POLLIN, 0});
        if (c.err >= 0) fds.push_back({c.err, POLLIN, 0});
        if (c.in >= 0 && !killed) fds.push_back({c.in, POLLOUT, 0});
        if (fds.empty()) {
            if (exited) break;
            // Every pipe is closed but the program still runs: wait for its end.
            ::usleep(10000);
            continue;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        const int wait_ms = exited ? 0
                            : killed
                                ? 10
                                : static_cast<int>(std::clamp<long long>(left.count(), 0, 100));
        const int n = ::poll(fds.data(), fds.size(), wait_ms);
        if (n < 0 && errno != EINTR) break;
        bool got = false;
        for (const auto& p : fds) {
            if (p.revents == 0) continue;
            if (p.fd == c.in) {
                const ssize_t w =
                    ::write(c.in, o.stdin_data.data() + written, o.stdin_data.size() - written);
                if (w > 0) written += static_cast<std::size_t>(w);
                if (w < 0 && errno != EAGAIN && errno != EINTR) written = o.stdin_data.size();
                if (written >= o.stdin_data.size()) close_fd(c.in);
                continue;
            }
            char buf[16384];
            const ssize_t k = ::read(p.fd, buf, sizeof buf);
            if (k > 0) {
                const bool is_out = p.fd == c.out;
                keep(is_out ? r.output : r.errors, buf, static_cast<std::size_t>(k));
                if (is_out) lines(buf, static_cast<std::size_t>(k));
                got = true;
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                close_fd(p.fd == c.out ? c.out : c.err);
            }
        }
        if (exited && !got) break;
    }
    close_fd(c.in);
    close_fd(c.out);
    close_fd(c.err);
    if (!c.reaped) {
        if (!killed) c.kill_group();  // poll failed: it is not left running unwatched
        if (!c.reap_within(kReapGrace)) {
            // Stuck in the kernel (a wedged driver): left behind rather than hang the caller.
            r.errors += (r.errors.empty() ? "" : "\n") + argv[0] + " did not end when killed";
            c.pid = -1;
            return r;
        }
    }
    if (o.on_line && !partial.empty()) o.on_line(partial);
    r.status = c.wait_status < 0 ? -1 : status_of(c.wait_status);
    return r;
}

}  // namespace sky::detail
