#pragma once
/// \file A program a test runs as a child process: its stdout on a pipe read line by line with
/// a bound, in a process group of its own (a test's kill() reaches it alone, a terminal's Ctrl-C
/// its group), and SIGKILLed and reaped when the object goes, however the test ends.
/// Header-only.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace sky::test {

class ChildProcess {
public:
    using Clock = std::chrono::steady_clock;

    /// Starts argv[0] (looked up in PATH) with this process's environment plus `extra_env`
    /// ("NAME=value" entries, which win over inherited ones of the same name). Throws
    /// std::system_error when it cannot be started.
    explicit ChildProcess(const std::vector<std::string>& argv_s,
                          const std::vector<std::string>& extra_env = {}) {
        if (argv_s.empty()) throw std::invalid_argument("ChildProcess: no program");
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "pipe2");
        std::vector<std::string> args = argv_s;
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_s;
        for (char** e = environ; e && *e; ++e) {
            const std::string v = *e;
            bool overridden = false;
            for (const auto& x : extra_env)
                if (const auto eq = x.find('=');
                    eq != std::string::npos && v.compare(0, eq + 1, x, 0, eq + 1) == 0)
                    overridden = true;
            if (!overridden) env_s.push_back(v);
        }
        env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
        std::vector<char*> envp;
        for (auto& e : env_s) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
        const int rc = ::posix_spawnp(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        ::close(p[1]);
        out_ = p[0];
        if (rc != 0) {
            ::close(out_);
            throw std::system_error(rc, std::generic_category(), "posix_spawnp " + argv_s[0]);
        }
    }
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;
    ~ChildProcess() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (out_ >= 0) ::close(out_);
    }

    /// Its process id (also its process group's).
    [[nodiscard]] pid_t pid() const { return pid_; }

    /// The next line of its stdout that starts with `prefix`, waiting at most `limit`; none at
    /// the limit or at the end of its output. Every line read is kept in seen().
    std::optional<std::string> line(const std::string& prefix, std::chrono::milliseconds limit) {
        const auto until = Clock::now() + limit;
        for (;;) {
            for (std::size_t nl; (nl = buf_.find('\n')) != std::string::npos;) {
                std::string l = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                seen_ += l + "\n";
                if (l.rfind(prefix, 0) == 0) return l;
            }
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
            if (left.count() <= 0) return std::nullopt;
            pollfd p{out_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char b[4096];
            const ssize_t n = ::read(out_, b, sizeof b);
            if (n <= 0) return std::nullopt;
            buf_.append(b, static_cast<std::size_t>(n));
        }
    }

    /// Its wait status once it ended, waiting at most `limit`; none while it still runs.
    std::optional<int> wait(std::chrono::milliseconds limit) {
        const auto until = Clock::now() + limit;
        for (;;) {
            int st = 0;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                reaped_ = true;
                return st;
            }
            if (Clock::now() >= until) return std::nullopt;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

    /// Every line of its stdout read so far, each with its newline.
    [[nodiscard]] const std::string& seen() const { return seen_; }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    bool reaped_ = false;
    std::string buf_, seen_;
};

}  // namespace sky::test
