#include "util/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sky/errors.hpp"

extern char** environ;

namespace sky::detail {

namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

int status_of(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

}  // namespace

SubprocessResult run_subprocess(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env,
                                std::chrono::milliseconds timeout, std::size_t output_cap,
                                std::string_view stdin_data) {
    if (argv.empty()) throw Error("run_subprocess: no program given");
    SubprocessResult r;
    // The environment: ours, with `env` replacing or adding variables.
    std::vector<std::string> envs;
    auto name_of = [](std::string_view e) { return e.substr(0, e.find('=')); };
    for (char** e = environ; e && *e; ++e) {
        const std::string_view entry(*e);
        bool replaced = false;
        for (const auto& x : env) replaced = replaced || name_of(x) == name_of(entry);
        if (!replaced) envs.emplace_back(entry);
    }
    envs.insert(envs.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args(argv);
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
        ::pipe2(err, O_CLOEXEC) != 0) {
        r.errors = std::string("cannot make a pipe: ") + std::strerror(errno);
        for (int* p : {in, out, err})
            for (int k = 0; k < 2; ++k) close_fd(p[k]);
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A group of its own: a timeout ends whatever it started too.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, argp[0], &fa, &attr, argp.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close_fd(in[0]);
    close_fd(out[1]);
    close_fd(err[1]);
    if (rc != 0) {
        r.errors = "cannot start " + argv[0] + ": " + std::strerror(rc);
        close_fd(in[1]);
        close_fd(out[0]);
        close_fd(err[0]);
        return r;
    }
    ::fcntl(in[1], F_SETFL, O_NONBLOCK);
    if (stdin_data.empty()) close_fd(in[1]);

    const auto deadline = Clock::now() + timeout;
    std::size_t written = 0;
    bool exited = false;
    int st = 0;
    auto keep = [&](std::string& to, const char* data, std::size_t n) {
        const std::size_t room = output_cap > to.size() ? output_cap - to.size() : 0;
        if (n > room) r.truncated = true;
        to.append(data, std::min(n, room));
    };
    for (;;) {
        // Once the program itself has ended, what is already in the pipes is read and the rest
        // ignored: a process it left running (a daemon it started) may hold them open.
        if (!exited && ::waitpid(pid, &st, WNOHANG) == pid) exited = true;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (!exited && left.count() <= 0) {
            ::kill(-pid, SIGKILL);
            ::kill(pid, SIGKILL);
            r.timed_out = true;
            break;
        }
        std::vector<pollfd> fds;
        if (out[0] >= 0) fds.push_back({out[0], POLLIN, 0});
        if (err[0] >= 0) fds.push_back({err[0], POLLIN, 0});
        if (in[1] >= 0) fds.push_back({in[1], POLLOUT, 0});
        if (fds.empty()) {
            if (exited) break;
            // Every pipe is closed but the program still runs: wait for its end.
            ::usleep(10000);
            continue;
        }
        const int wait_ms = exited ? 0 : static_cast<int>(std::min<long long>(left.count(), 100));
        const int n = ::poll(fds.data(), fds.size(), wait_ms);
        if (n < 0 && errno != EINTR) break;
        bool got = false;
        for (const auto& p : fds) {
            if (p.revents == 0) continue;
            if (p.fd == in[1]) {
                const ssize_t w =
                    ::write(in[1], stdin_data.data() + written, stdin_data.size() - written);
                if (w > 0) written += static_cast<std::size_t>(w);
                if (w < 0 && errno != EAGAIN && errno != EINTR) written = stdin_data.size();
                if (written >= stdin_data.size()) close_fd(in[1]);
                continue;
            }
            char buf[16384];
            const ssize_t k = ::read(p.fd, buf, sizeof buf);
            if (k > 0) {
                keep(p.fd == out[0] ? r.output : r.errors, buf, static_cast<std::size_t>(k));
                got = true;
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                close_fd(p.fd == out[0] ? out[0] : err[0]);
            }
        }
        if (exited && !got) break;
    }
    close_fd(in[1]);
    close_fd(out[0]);
    close_fd(err[0]);
    if (!exited) {
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    r.status = status_of(st);
    return r;
}

}  // namespace sky::detail
