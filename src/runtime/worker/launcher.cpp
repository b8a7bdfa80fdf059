#include "runtime/worker/launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "runtime/node_marks.hpp"
#include "runtime/preemption.hpp"
#include "runtime/sealed_box.hpp"
#include "runtime/worker.hpp"
#include "runtime/worker_launch.hpp"
#include "sky/errors.hpp"

extern char** environ;

namespace sky::detail {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// ---- the settings' text ------------------------------------------------------------------

std::string escaped(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string unescaped(std::string_view v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) {
            ++i;
            out += v[i] == 'n' ? '\n' : v[i];
        } else {
            out += v[i];
        }
    }
    return out;
}

long long number_of(const std::string& name, const std::string& v) {
    try {
        std::size_t used = 0;
        const long long n = std::stoll(v, &used);
        if (used == v.size() && n >= 0) return n;
    } catch (const std::exception&) {
    }
    throw ConfigError("launcher settings: '" + name + "' is not a whole number from 0");
}

// ---- small process and file helpers ------------------------------------------------------

// Field 22 of /proc/PID/stat (the start time): with the pid, what tells a process from a later
// one the kernel gives the same pid. Empty when there is no such process.
std::string start_time(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return {};
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int k = 3; k <= 22 && rest >> field; ++k) {
    }
    return field;
}

std::string read_text(const fs::path& p, std::size_t limit = 1 << 20) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return {};
    std::string s(limit, '\0');
    f.read(s.data(), static_cast<std::streamsize>(limit));
    s.resize(static_cast<std::size_t>(f.gcount()));
    return s;
}

// Written whole (renamed into place), mode 0600.
void write_atomic(const fs::path& p, const std::string& content) {
    const std::string tmp = p.string() + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    std::size_t at = 0;
    while (at < content.size()) {
        const ssize_t n = ::write(fd, content.data() + at, content.size() - at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
    }
    ::close(fd);
    ::rename(tmp.c_str(), p.c_str());
}

void write_all(int fd, std::string_view s) {
    while (!s.empty()) {
        const ssize_t n = ::write(fd, s.data(), s.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        s.remove_prefix(static_cast<std::size_t>(n));
    }
}

std::string self_exe() {
    std::error_code ec;
    auto p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? program_name() : p.string();
}

bool present(const fs::path& p) {
    std::error_code ec;
    return fs::exists(p, ec);
}

// Age of a file's last change; nullopt when it is missing.
std::optional<std::chrono::seconds> age_of(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return std::nullopt;
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return std::chrono::duration_cast<seconds>(now - seconds(st.st_mtime));
}

// A descriptor that becomes readable when process `pid` ends (-1 where the kernel has none).
int pidfd_of(long pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
    (void)pid;
    return -1;
#endif
}

// Waits until process `pid` (not our child) is gone, at most `limit`; true when it is.
bool wait_gone(long pid, const std::string& start, milliseconds limit) {
    const auto until = Clock::now() + limit;
    const int pfd = pidfd_of(pid);
    if (pfd >= 0) {
        pollfd p{pfd, POLLIN, 0};
        for (;;) {
            const auto left =
                std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
            if (left <= 0) break;
            const int r = ::poll(&p, 1, static_cast<int>(left));
            if (r > 0) {
                ::close(pfd);
                return true;
            }
            if (r < 0 && errno != EINTR) break;
        }
        ::close(pfd);
        return start_time(pid) != start;
    }
    // No pidfds: a bounded look every 20 ms.
    while (Clock::now() < until) {
        if (start_time(pid) != start) return true;
        std::this_thread::sleep_for(milliseconds(20));
    }
    return start_time(pid) != start;
}

// Runs argv (stdin and stdout /dev/null, stderr to `err_fd`, or /dev/null) and returns its
// exit status (128 + signal), or -1 when it could not start or ran past `limit` (it is killed).
int run_quietly(const std::vector<std::string>& argv, milliseconds limit, int err_fd = -1) {
    if (argv.empty()) return -1;
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        ::setpgid(0, 0);
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(err_fd >= 0 ? err_fd : null, 2);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    const auto until = Clock::now() + limit;
    const int pfd = pidfd_of(pid);
    int status = 0;
    for (;;) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return -1;
        if (Clock::now() >= until) {
            ::kill(-pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            if (pfd >= 0) ::close(pfd);
            return -1;
        }
        if (pfd >= 0) {
            pollfd p{pfd, POLLIN, 0};
            ::poll(&p, 1, 100);
        } else {
            std::this_thread::sleep_for(milliseconds(20));
        }
    }
    if (pfd >= 0) ::close(pfd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs argv with `env` and returns its stdout (at most 4 MiB); nullopt when it failed.
std::optional<std::string> capture(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& env, milliseconds limit) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
    const pid_t pid = ::fork();
    if (pid < 0) return std::nullopt;
    if (pid == 0) {
        ::setpgid(0, 0);
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(out[1], 1);
        ::dup2(null, 2);
        std::vector<char*> args, envp;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
        envp.push_back(nullptr);
        ::execvpe(args[0], args.data(), envp.data());
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    ::close(out[1]);
    std::string text;
    const auto until = Clock::now() + limit;
    char buf[65536];
    bool late = false;
    for (;;) {
        const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
        if (left <= 0) {
            late = true;
            break;
        }
        pollfd p{out[0], POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(left));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            late = r == 0;
            break;
        }
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (text.size() < (4u << 20)) text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    if (late) ::kill(-pid, SIGKILL);  // the command and whatever it started (a curl)
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (late || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return text;
}

// This process's environment, for a command it runs as itself (the probe).
std::vector<std::string> environment() {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    return env;
}

void set_env(std::vector<std::string>& env, const std::string& name, const std::string& value) {
    const std::string prefix = name + "=";
    for (auto& e : env)
        if (e.rfind(prefix, 0) == 0) {
            e = prefix + value;
            return;
        }
    env.push_back(prefix + value);
}

std::string get_env(const std::vector<std::string>& env, const std::string& name) {
    const std::string prefix = name + "=";
    for (const auto& e : env)
        if (e.rfind(prefix, 0) == 0) return e.substr(prefix.size());
    return {};
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

// The first lines of the newest sanitizer report (RUN/sanitizer.*, newest first, then
// worker.log): the first matching line and those after it, launch_sanitizer_lines at most.
std::vector<std::string> sanitizer_report(const fs::path& run) {
    static const std::regex start(R"((ERROR|WARNING): [A-Za-z]+Sanitizer|runtime error:)");
    std::vector<std::pair<fs::file_time_type, fs::path>> reports;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run, ec))
        if (e.path().filename().string().rfind("sanitizer.", 0) == 0)
            reports.emplace_back(e.last_write_time(ec), e.path());
    std::sort(reports.begin(), reports.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<fs::path> files;
    for (auto& r : reports) files.push_back(r.second);
    files.push_back(run / "worker.log");
    std::vector<std::string> out;
    for (const auto& f : files) {
        const auto lines = lines_of(read_text(f, 4u << 20));
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (!std::regex_search(lines[i], start)) continue;
            for (std::size_t k = i; k < lines.size() && k < i + launch_sanitizer_lines; ++k) {
                if (static_cast<int>(out.size()) >= launch_sanitizer_lines) return out;
                out.push_back(lines[k]);
            }
            break;
        }
    }
    return out;
}

std::vector<std::string> tail_of(const fs::path& p, std::size_t n) {
    auto lines = lines_of(read_text(p, 4u << 20));
    if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<long>(n));
    return lines;
}

std::string status_text(int status) {
    return std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// "PID START" from a file; nullopt unless both are whole numbers.
std::optional<std::pair<long, std::string>> recorded(const fs::path& p) {
    std::istringstream is(read_text(p, 256));
    std::string pid, start;
    is >> pid >> start;
    if (pid.empty() || start.empty() || pid.find_first_not_of("0123456789") != std::string::npos ||
        start.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return std::pair<long, std::string>{std::stol(pid), start};
}

// Ends the launcher recorded in `run` and whatever is left of its worker's group, only while
// they are the processes that recorded themselves (or, for the group, its leader is gone while
// members remain: the kernel reuses no id a group still holds). The launcher ends its worker
// itself (TERM, half a second, KILL).
void end_recorded(const fs::path& run) {
    if (auto l = recorded(run / "launcher.pid");
        l && l->first != ::getpid() && start_time(l->first) == l->second) {
        ::kill(static_cast<pid_t>(l->first), SIGTERM);
        if (!wait_gone(l->first, l->second, milliseconds(4000)) &&
            start_time(l->first) == l->second)
            ::kill(static_cast<pid_t>(l->first), SIGKILL);
    }
    if (auto w = recorded(run / "worker.pgid")) {
        const auto st = start_time(w->first);
        if (st.empty() || st == w->second) ::kill(-static_cast<pid_t>(w->first), SIGKILL);
    }
}

// ---- the launcher ------------------------------------------------------------------------

// How long a worker has from its start to listening.
constexpr auto kStartBound = seconds(15);

int g_signal_pipe[2] = {-1, -1};

void on_launcher_signal(int sig) {
    const int saved = errno;
    const char c = static_cast<char>(sig);
    [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
    errno = saved;
}

// Where the launcher's words for the client go: the pipe to the foreground half (detached), or
// stdout (in the foreground).
struct Voice {
    int fd = 1;
    void say(const std::string& line) const { write_all(fd, line + "\n"); }
};

class Launcher {
public:
    explicit Launcher(LaunchSettings s) : s_(std::move(s)), run_(s_.run_dir) {}

    int run() {
        ::umask(077);
        std::error_code ec;
        fs::create_directories(run_, ec);
        if (::chdir(run_.c_str()) != 0) {
            std::fprintf(stderr, "sky launcher: cannot enter %s: %s\n", run_.c_str(),
                         std::strerror(errno));
            return 90;
        }
        // A launcher of this directory before (a restarted worker's): it and its worker end
        // first.
        end_recorded(run_);
        // A notice stands for the worker it was given to: a fresh one hears it again from the
        // probe (or the next signal) if it still stands.
        for (const char* f : {"port", "exit", "crash", "preempted", "notice"})
            fs::remove(run_ / f, ec);
        for (const auto& e : fs::directory_iterator(run_, ec)) {
            const auto name = e.path().filename().string();
            if (name.rfind("crash.", 0) == 0 || name.rfind("sanitizer.", 0) == 0)
                fs::remove(e.path(), ec);
        }
        write_atomic(run_ / "token", s_.token + "\n");
        std::fill(s_.token.begin(), s_.token.end(), '\0');
        s_.token.clear();
        write_atomic(run_ / "heartbeat", "");
        env_ = worker_env();

        if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 90;
        if (s_.detach) {
            int report[2];
            if (::pipe2(report, O_CLOEXEC) != 0) return 90;
            const pid_t pid = ::fork();
            if (pid < 0) return 90;
            if (pid > 0) {
                // The foreground half: what the watching half reports, then its word's status.
                ::close(report[1]);
                std::string said;
                char buf[4096];
                for (;;) {
                    const ssize_t n = ::read(report[0], buf, sizeof buf);
                    if (n < 0 && errno == EINTR) continue;
                    if (n <= 0) break;
                    said.append(buf, static_cast<std::size_t>(n));
                }
                write_all(1, said);
                for (const auto& l : lines_of(said))
                    if (node::marks::port.value_in(l)) return 0;
                if (said.empty())
                    write_all(1, "sky launcher: it ended before its worker listened\n");
                return 1;
            }
            ::close(report[0]);
            ::setsid();
            const int null = ::open("/dev/null", O_RDWR);
            const int log = ::open((run_ / "launcher.log").c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
            ::dup2(null, 0);
            ::dup2(log >= 0 ? log : null, 1);
            ::dup2(log >= 0 ? log : null, 2);
            voice_.fd = report[1];
            report_fd_ = report[1];
            std::signal(SIGHUP, SIG_IGN);
        }
        install_signals();
        write_atomic(run_ / "launcher.pid",
                     std::to_string(::getpid()) + " " + start_time(::getpid()) + "\n");
        if (!s_.current_file.empty()) {
            me_ = get_env(env_, "SLURM_JOB_ID") + "." + get_env(env_, "SLURM_STEP_ID");
            if (me_ == ".") me_ = std::to_string(::getpid());
            write_atomic(s_.current_file, me_ + "\n");
        }
        started_ = Clock::now();
        if (!start_worker()) return finish_early();
        supervise();
        return finish();
    }

private:
    // The worker's environment: this one's without the launch variables, then what the image's
    // env.sh exports, the pool's env, the shipped libraries, the sanitizers' report files and
    // the worker's launch variables.
    std::vector<std::string> worker_env() const {
        std::vector<std::string> env;
        for (char** e = environ; e && *e; ++e)
            if (!WorkerLaunch::is_launch_variable(*e)) env.emplace_back(*e);
        if (!s_.image_env.empty() && present(s_.image_env)) {
            // One line of shell: env.sh is the image's shell file; what it exports is its result.
            if (auto out =
                    capture({"bash", "-c", ". \"$1\" > /dev/null 2>&1 < /dev/null && exec env -0",
                             "sky-env", s_.image_env},
                            env, seconds(30))) {
                std::vector<std::string> fresh;
                std::size_t at = 0;
                while (at < out->size()) {
                    const auto end = out->find('\0', at);
                    const auto entry = out->substr(at, end - at);
                    if (!entry.empty() && entry.find('=') != std::string::npos &&
                        !WorkerLaunch::is_launch_variable(entry) && entry.rfind("_=", 0) != 0)
                        fresh.push_back(entry);
                    if (end == std::string::npos) break;
                    at = end + 1;
                }
                env = std::move(fresh);
            }
        }
        for (const auto& [k, v] : s_.env) set_env(env, k, v);
        if (!s_.lib_dir.empty()) {
            const auto old = get_env(env, "LD_LIBRARY_PATH");
            set_env(env, "LD_LIBRARY_PATH", s_.lib_dir + (old.empty() ? "" : ":" + old));
        }
        // A sanitized worker writes its report to files that `status` reads (options the pool's
        // env gave come after, and win); for a program built without sanitizers these are inert.
        for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"}) {
            const auto old = get_env(env, var);
            set_env(env, var,
                    "log_path=" + (run_ / "sanitizer").string() + (old.empty() ? "" : ":" + old));
        }
        WorkerLaunch l;
        l.listen = s_.listen;
        l.token_file = (run_ / "token").string();
        l.port_file = (run_ / "port").string();
        l.heartbeat_file = (run_ / "heartbeat").string();
        l.crash_file = (run_ / "crash").string();
        if (!s_.probe.empty() || s_.notice_signal > 0) l.notice_file = (run_ / "notice").string();
        l.accept_timeout = seconds(std::max<long long>(1, s_.accept_timeout_s));
        l.seal = s_.seal;
        if (!s_.allow_from_variable.empty()) {
            const auto a = get_env(env, s_.allow_from_variable);
            if (!a.empty() && a.find_first_not_of("0123456789abcdefABCDEF.:") == std::string::npos)
                l.allow_from = a;
        }
        for (auto& e : l.env()) env.push_back(std::move(e));
        return env;
    }

    void install_signals() {
        struct sigaction sa {};
        sa.sa_handler = on_launcher_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        ::sigaction(SIGCHLD, &sa, nullptr);
        ::sigaction(SIGTERM, &sa, nullptr);
        ::sigaction(SIGINT, &sa, nullptr);
        if (!s_.detach) ::sigaction(SIGHUP, &sa, nullptr);
        if (s_.notice_signal > 0) ::sigaction(s_.notice_signal, &sa, nullptr);
        std::signal(SIGPIPE, SIG_IGN);
    }

    // Starts the worker and waits until it listens (true) or ends first (false).
    bool start_worker() {
        int ready[2];
        if (::pipe2(ready, O_CLOEXEC) != 0) return false;
        std::vector<std::string> env = env_;
        env.push_back("SKY_WORKER_READY_FD=" + std::to_string(ready[1]));
        const std::string exe = self_exe();
        const int log =
            ::open((run_ / "worker.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        const pid_t pid = ::fork();
        if (pid < 0) return false;
        if (pid == 0) {
            ::setpgid(0, 0);
            sigset_t none;
            sigemptyset(&none);
            ::sigprocmask(SIG_SETMASK, &none, nullptr);
            for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGPIPE}) std::signal(sig, SIG_DFL);
            // The batch system's warning reaches every process of the step (Slurm signals
            // the step's whole process tree): ignored, inherited through exec, so that it
            // ends no worker process; a call that wants it installs its own handler.
            if (s_.notice_signal > 0) std::signal(s_.notice_signal, SIG_IGN);
            const int null = ::open("/dev/null", O_RDWR);
            ::dup2(null, 0);
            // Detached, its output goes to worker.log; in the foreground (a job step) it is the
            // step's output, beside the launcher's marks.
            if (s_.detach) {
                ::dup2(log >= 0 ? log : null, 1);
                ::dup2(log >= 0 ? log : null, 2);
            }
            ::fcntl(ready[1], F_SETFD, 0);
            std::vector<char*> envp;
            for (auto& e : env) envp.push_back(e.data());
            envp.push_back(nullptr);
            char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(worker_flag),
                            nullptr};
            ::execve(exe.c_str(), argv, envp.data());
            std::fprintf(stderr, "sky launcher: cannot start %s: %s\n", exe.c_str(),
                         std::strerror(errno));
            ::_exit(127);
        }
        ::setpgid(pid, pid);
        worker_ = pid;
        if (log >= 0) ::close(log);
        ::close(ready[1]);
        write_atomic(run_ / "worker.pgid", std::to_string(pid) + " " + start_time(pid) + "\n");
        // The worker writes its port to the pipe once it listens; end of file without one: it
        // ended (or closed it) first.
        std::string port;
        char buf[256];
        // The start's bound: a worker that does not listen within it is given up.
        const auto until = Clock::now() + kStartBound;
        for (;;) {
            const auto left =
                std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
            pollfd p{ready[0], POLLIN, 0};
            const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0)));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            const ssize_t n = ::read(ready[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            port.append(buf, static_cast<std::size_t>(n));
            if (port.find('\n') != std::string::npos) break;
        }
        ::close(ready[0]);
        port = port.substr(0, port.find('\n'));
        if (port.empty()) return false;
        voice_.say(node::marks::port.line(port));
        // Detached: the foreground half returns now, with what it was told.
        if (report_fd_ >= 0) {
            ::close(report_fd_);
            report_fd_ = -1;
            voice_.fd = 1;
        }
        return true;
    }

    // Drains the signal pipe: whether the worker ended (reaped into status_) and whether the
    // launcher was told to stop.
    void drain_signals() {
        char c;
        while (::read(g_signal_pipe[0], &c, 1) == 1) {
            if (c == SIGTERM || c == SIGINT || c == SIGHUP) stop_asked_ = true;
            if (s_.notice_signal > 0 && c == static_cast<char>(s_.notice_signal)) signalled_ = true;
        }
        if (worker_ > 0 && !worker_done_) {
            int st = 0;
            if (::waitpid(worker_, &st, WNOHANG) == worker_) {
                worker_done_ = true;
                status_ = st;
            }
        }
    }

    // Waits up to `d` for a signal (or the worker's end).
    void nap(milliseconds d) {
        pollfd p{g_signal_pipe[0], POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(d.count()));
        drain_signals();
    }

    // Ends the worker's group: TERM, `grace` to go, then KILL.
    void end_worker(milliseconds grace) {
        if (worker_ <= 0) return;
        if (!worker_done_) ::kill(-worker_, SIGTERM);
        const auto until = Clock::now() + grace;
        while (!worker_done_ && Clock::now() < until)
            nap(std::chrono::duration_cast<milliseconds>(until - Clock::now()));
        ::kill(-worker_, SIGKILL);
        if (!worker_done_) {
            int st = 0;
            while (::waitpid(worker_, &st, 0) < 0 && errno == EINTR) {
            }
            worker_done_ = true;
            status_ = st;
        }
    }

    bool client_silent() const {
        if (s_.idle_timeout_s <= 0) return false;
        const auto a = age_of(run_ / "heartbeat");
        return a && a->count() > s_.idle_timeout_s;
    }

    bool past_deadline() const {
        return s_.hard_timeout_s > 0 && Clock::now() - started_ > seconds(s_.hard_timeout_s);
    }

    void log(const std::string& what) const {
        const auto t = std::time(nullptr);
        char when[32];
        std::strftime(when, sizeof when, "%FT%TZ", std::gmtime(&t));
        std::fprintf(stderr, "%s sky launcher: %s\n", when, what.c_str());
        std::fflush(stderr);
    }

    // A notice the provider gave: into the notice file, which the worker forwards to its
    // client (runtime/preemption.hpp). A firm one is kept: the worker is ended at its deadline.
    void noticed(const NodeNotice& n) {
        if (firm_ || (notice_ && *notice_ == n)) return;  // nothing new
        log(fmt_notice(n));
        write_atomic(run_ / "notice", format_notice_file(n));
        notice_ = n;
        if (n.firm) firm_ = n;
    }

    static std::string fmt_notice(const NodeNotice& n) {
        const auto left =
            std::chrono::duration_cast<seconds>(n.deadline - std::chrono::system_clock::now())
                .count();
        return std::string(n.firm ? "the provider reclaims this machine in "
                                  : "the provider may reclaim this machine, at the earliest in ") +
               std::to_string(std::max<long long>(0, left)) + " s: " + n.reason;
    }

    void supervise() {
        auto next_probe = started_ + seconds(std::max<long long>(1, s_.probe_period_s));
        while (!worker_done_) {
            nap(milliseconds(1000));
            if (worker_done_) break;
            if (stop_asked_) {
                // The pool's stop or a fresh worker's launch (the client waits for it), or the
                // job's end on Slurm (its KillWait follows with SIGKILL).
                log("told to stop; ending the worker");
                end_ = End::stopped;
                end_worker(milliseconds(500));
                break;
            }
            if (client_silent() || past_deadline()) {
                log(past_deadline() ? "the pool's hard timeout passed; ending the worker"
                                    : "no word from the client for the idle timeout; ending the "
                                      "worker");
                end_ = End::expired;
                end_worker(milliseconds(2000));
                break;
            }
            if (signalled_) {
                signalled_ = false;
                NodeNotice n;
                // The batch system ends the step itself: the deadline is the earliest it may,
                // and nothing is ended early here.
                n.deadline = std::chrono::system_clock::now() + seconds(s_.notice_lead_s);
                n.firm = false;
                n.reason = s_.notice_reason.empty() ? "the batch system signalled the job"
                                                    : s_.notice_reason;
                noticed(n);
            }
            // Probed until a firm notice stands (a softer one may be followed by a firm one).
            if (!s_.probe.empty() && !firm_ && Clock::now() >= next_probe) {
                next_probe = Clock::now() + seconds(std::max<long long>(1, s_.probe_period_s));
                if (auto out = capture(s_.probe, environment(), seconds(10)))
                    noticed(parse_probe_output(*out, std::chrono::system_clock::now()));
            }
            // The worker goes on until the deadline, saving what it can; then the machine is
            // the provider's (a probe that gave no deadline: at once).
            if (firm_ && std::chrono::system_clock::now() >= firm_->deadline) {
                log("the provider's deadline came; ending the worker");
                write_atomic(run_ / "preempted", "preempted\n");
                end_ = End::preempted;
                end_worker(milliseconds(1000));
                break;
            }
        }
    }

    void unmount() const {
        if (!s_.unmount_script.empty() && present(s_.unmount_script))
            run_quietly({"bash", s_.unmount_script}, seconds(60));
    }

    void power_off() const {
        if (!s_.power_off || !present("/etc/sky/power-off-on-expiry")) return;
        log("powering the machine off");
        if (::geteuid() != 0 &&
            run_quietly({"sudo", "-n", "shutdown", "-h", "now"}, seconds(30)) == 0)
            return;
        run_quietly({"shutdown", "-h", "now"}, seconds(30));
    }

    bool client_silent_for_idle() const {
        if (s_.idle_timeout_s <= 0) return false;
        const auto a = age_of(run_ / "heartbeat");
        return !a || a->count() >= std::max<long long>(1, s_.idle_timeout_s - 1);
    }

    std::string current() const {
        auto c = read_text(s_.current_file, 256);
        c = c.substr(0, c.find('\n'));
        return c.empty() ? me_ : c;
    }

    // The worker ended idle and the provider releases the machine then (Slurm: the job): unless
    // a newer launcher of the node took its place (the pool replaced this worker, its client
    // lives), which it may still do for superseded_grace_s.
    void release_if_idle() {
        if (s_.release_on_idle.empty() || !client_silent_for_idle()) return;
        const auto until = Clock::now() + seconds(s_.superseded_grace_s);
        while (!stop_asked_ && (s_.current_file.empty() || current() == me_) &&
               Clock::now() < until)
            nap(milliseconds(1000));
        const std::string c = s_.current_file.empty() ? me_ : current();
        if (c == me_) {
            voice_.say(std::string(node::marks::idle.text));
            run_quietly(s_.release_on_idle, seconds(60));
        } else {
            voice_.say(node::marks::superseded.line(c));
        }
    }

    int finish_early() {
        // The worker ended (or never said where it listens): its last words, for the error.
        if (!worker_done_) end_worker(milliseconds(500));
        const std::string code = status_text(status_);
        write_atomic(run_ / "exit", code + "\n");
        for (const auto& l : tail_of(run_ / "worker.log", 20)) voice_.say(l);
        for (const auto& l : sanitizer_report(run_)) voice_.say(l);
        voice_.say(node::marks::exit.line(code));
        return std::atoi(code.c_str()) == 0 ? 1 : std::atoi(code.c_str());
    }

    int finish() {
        const std::string code = status_text(status_);
        write_atomic(run_ / "exit", code + "\n");
        voice_.say(node::marks::exit.line(code));
        std::error_code ec;
        if (end_ == End::expired) {
            // The client is gone: the node's life ends with the pool's.
            unmount();
            fs::remove_all(run_, ec);
            power_off();
        } else if (end_ == End::ran_out) {
            release_if_idle();
            // Volumes stay while the client may still come back for a fresh worker; they go
            // once it has been silent for the idle timeout or the pool's time is up.
            if (!s_.unmount_script.empty() && !s_.remove_run_dir_at_end) {
                while (!stop_asked_ && !client_silent() && !past_deadline())
                    nap(milliseconds(1000));
                if (!stop_asked_) unmount();
            }
        }
        if (s_.remove_run_dir_at_end) {
            // A worker that ended by itself (a crash): its exit and crash files stay until the
            // client has read them (`status` leaves a mark), for its stack in the error, or
            // until the client is silent, a newer launcher took over, or 60 s passed.
            if (end_ == End::ran_out && code != "0") {
                const auto until = Clock::now() + seconds(60);
                while (!stop_asked_ && !present(run_ / "status-read") && !client_silent() &&
                       (s_.current_file.empty() || current() == me_) && !past_deadline() &&
                       Clock::now() < until)
                    nap(milliseconds(200));
            }
            if (!s_.current_file.empty() && read_text(s_.current_file, 256) == me_ + "\n")
                fs::remove(s_.current_file, ec);
            unmount();
            (void)::chdir("/");
            fs::remove_all(run_, ec);
            // The node's and the pool's directories, each only when nothing else is in it.
            fs::remove(run_.parent_path(), ec);
            fs::remove(run_.parent_path().parent_path(), ec);
        }
        return std::atoi(code.c_str());
    }

    enum class End { ran_out, stopped, expired, preempted };

    LaunchSettings s_;
    fs::path run_;
    std::vector<std::string> env_;
    Voice voice_;
    int report_fd_ = -1;
    std::string me_;
    Clock::time_point started_{};
    pid_t worker_ = -1;
    bool worker_done_ = false;
    int status_ = 0;
    bool stop_asked_ = false;
    bool signalled_ = false;            // the notice signal came (not handled yet)
    std::optional<NodeNotice> notice_;  // the last notice written
    std::optional<NodeNotice> firm_;    // a firm notice: the worker ends at its deadline
    End end_ = End::ran_out;
};

// ---- stop and status ---------------------------------------------------------------------

int stop_main(const std::vector<std::string>& args) {
    if (args.empty()) {
        std::fprintf(stderr, "usage: %s stop RUN [--unmount SCRIPT] [--remove [DIR...]]\n",
                     launch_flag);
        return 2;
    }
    const fs::path run = args[0];
    std::string unmount_script;
    bool remove = false;
    std::vector<std::string> extra;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--unmount" && i + 1 < args.size())
            unmount_script = args[++i];
        else if (args[i] == "--remove")
            remove = true;
        else if (remove)
            extra.push_back(args[i]);
    }
    end_recorded(run);
    // The node's file server (ship/shipment.hpp), only when it is this run's: its command line
    // or environment names the run directory.
    if (auto p = read_text(run / "serve.pid", 64); !p.empty()) {
        p = p.substr(0, p.find('\n'));
        if (!p.empty() && p.find_first_not_of("0123456789") == std::string::npos) {
            const std::string proc = "/proc/" + p;
            const std::string seen =
                read_text(proc + "/cmdline", 1 << 16) + read_text(proc + "/environ", 1 << 20);
            if (seen.find(run.string()) != std::string::npos)
                ::kill(static_cast<pid_t>(std::stol(p)), SIGTERM);
        }
    }
    if (!remove) return 0;
    if (!unmount_script.empty() && present(unmount_script))
        run_quietly({"bash", unmount_script}, seconds(60));
    std::error_code ec;
    fs::remove_all(run, ec);
    fs::remove(run.parent_path(), ec);  // the pool's directory, when no other node is in it
    for (const auto& d : extra) fs::remove_all(d, ec);
    return 0;
}

int status_main(const std::vector<std::string>& args) {
    if (args.size() != 1) {
        std::fprintf(stderr, "usage: %s status RUN\n", launch_flag);
        return 2;
    }
    const fs::path run = args[0];
    // The worker's end and the exit file are a moment apart: up to 2 s for it.
    for (int i = 0; i < 20 && !present(run / "exit") && !present(run / "preempted"); ++i)
        std::this_thread::sleep_for(milliseconds(100));
    if (present(run / "preempted")) {
        std::printf("preempted\n");
        return 0;
    }
    auto code = read_text(run / "exit", 64);
    code = code.substr(0, code.find('\n'));
    std::printf("%s\n", code.empty() ? "running" : code.c_str());
    for (const auto& l : sanitizer_report(run)) std::printf("%s\n", l.c_str());
    std::printf("%.*s\n", static_cast<int>(launch_crash_marker.size()), launch_crash_marker.data());
    const auto crash = read_text(run / "crash", 1 << 20);
    std::fwrite(crash.data(), 1, crash.size(), stdout);
    std::fflush(stdout);
    // Read: a launcher that keeps its worker's files for the client may remove them now.
    if (!code.empty()) write_atomic(run / "status-read", "1\n");
    return 0;
}

}  // namespace

std::string LaunchSettings::to_text() const {
    std::string t;
    auto line = [&](std::string_view name, std::string_view value) {
        t += name;
        t += ' ';
        t += escaped(value);
        t += '\n';
    };
    line("token", token);
    line("run_dir", run_dir);
    line("image_env", image_env);
    line("lib_dir", lib_dir);
    for (const auto& [k, v] : env) line("env", k + "=" + v);
    line("listen", listen);
    line("allow_from_variable", allow_from_variable);
    line("accept_timeout", std::to_string(accept_timeout_s));
    line("idle_timeout", std::to_string(idle_timeout_s));
    line("hard_timeout", std::to_string(hard_timeout_s));
    line("power_off", power_off ? "1" : "0");
    for (const auto& w : probe) line("probe", w);
    line("probe_period", std::to_string(probe_period_s));
    line("notice_signal", std::to_string(notice_signal));
    line("notice_lead", std::to_string(notice_lead_s));
    line("notice_reason", notice_reason);
    for (const auto& w : release_on_idle) line("release_on_idle", w);
    line("current_file", current_file);
    line("superseded_grace", std::to_string(superseded_grace_s));
    line("unmount_script", unmount_script);
    line("detach", detach ? "1" : "0");
    line("remove_run_dir_at_end", remove_run_dir_at_end ? "1" : "0");
    line("seal", seal ? "1" : "0");
    t += "end\n";
    return t;
}

LaunchSettings LaunchSettings::parse(std::string_view text) {
    LaunchSettings s;
    bool ended = false;
    std::size_t at = 0;
    while (at < text.size() && !ended) {
        auto end = text.find('\n', at);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view l = text.substr(at, end - at);
        at = end + 1;
        if (l == "end") {
            ended = true;
            break;
        }
        const auto sp = l.find(' ');
        const std::string name(l.substr(0, sp));
        const std::string v =
            sp == std::string_view::npos ? std::string() : unescaped(l.substr(sp + 1));
        if (name == "token")
            s.token = v;
        else if (name == "run_dir")
            s.run_dir = v;
        else if (name == "image_env")
            s.image_env = v;
        else if (name == "lib_dir")
            s.lib_dir = v;
        else if (name == "env") {
            const auto eq = v.find('=');
            if (eq == std::string::npos || eq == 0)
                throw ConfigError("launcher settings: an 'env' line without NAME=");
            s.env.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        } else if (name == "listen")
            s.listen = v;
        else if (name == "allow_from_variable")
            s.allow_from_variable = v;
        else if (name == "accept_timeout")
            s.accept_timeout_s = number_of(name, v);
        else if (name == "idle_timeout")
            s.idle_timeout_s = number_of(name, v);
        else if (name == "hard_timeout")
            s.hard_timeout_s = number_of(name, v);
        else if (name == "power_off")
            s.power_off = v == "1";
        else if (name == "probe")
            s.probe.push_back(v);
        else if (name == "probe_period")
            s.probe_period_s = number_of(name, v);
        else if (name == "notice_signal")
            s.notice_signal = static_cast<int>(number_of(name, v));
        else if (name == "notice_lead")
            s.notice_lead_s = number_of(name, v);
        else if (name == "notice_reason")
            s.notice_reason = v;
        else if (name == "release_on_idle")
            s.release_on_idle.push_back(v);
        else if (name == "current_file")
            s.current_file = v;
        else if (name == "superseded_grace")
            s.superseded_grace_s = number_of(name, v);
        else if (name == "unmount_script")
            s.unmount_script = v;
        else if (name == "detach")
            s.detach = v == "1";
        else if (name == "remove_run_dir_at_end")
            s.remove_run_dir_at_end = v == "1";
        else if (name == "seal")
            s.seal = v == "1";
        else
            throw ConfigError("launcher settings: unknown setting '" + name.substr(0, 40) + "'");
    }
    if (!ended) throw ConfigError("launcher settings: no 'end' line (cut short?)");
    if (s.run_dir.empty() || s.run_dir.front() != '/')
        throw ConfigError("launcher settings: 'run_dir' must be an absolute path");
    if (s.token.empty()) throw ConfigError("launcher settings: no 'token'");
    if (s.listen.empty()) throw ConfigError("launcher settings: no 'listen'");
    // The launcher's own signals are not a notice (SIGKILL and SIGSTOP cannot be caught).
    if (s.notice_signal != 0 &&
        (s.notice_signal < 1 || s.notice_signal > 64 || s.notice_signal == SIGKILL ||
         s.notice_signal == SIGSTOP || s.notice_signal == SIGTERM || s.notice_signal == SIGINT ||
         s.notice_signal == SIGHUP || s.notice_signal == SIGCHLD || s.notice_signal == SIGPIPE))
        throw ConfigError("launcher settings: 'notice_signal' " + std::to_string(s.notice_signal) +
                          " is not one the launcher can take as a notice (USR1, USR2, URG...)");
    return s;
}

int launch_main(int argc, char** argv) {
    std::vector<std::string> args;
    for (int i = 2; i < argc; ++i) args.emplace_back(argv[i]);
    if (!args.empty() && args[0] == "stop") return stop_main({args.begin() + 1, args.end()});
    if (!args.empty() && args[0] == "status") return status_main({args.begin() + 1, args.end()});
    // A sealed upload's two steps (runtime/sealed_box.hpp).
    if (!args.empty() && args[0] == "box-key") return box_key_main({args.begin() + 1, args.end()});
    if (!args.empty() && args[0] == "unbox") return unbox_main({args.begin() + 1, args.end()});
    if (!args.empty()) {
        std::fprintf(stderr,
                     "usage: %s [stop RUN ... | status RUN | box-key | unbox DIR NAME MODE] "
                     "(settings on stdin)\n",
                     launch_flag);
        return 2;
    }
    // The settings end with a line "end": read up to it (stdin may stay open after it).
    std::string text;
    char c;
    while (::read(0, &c, 1) == 1) {
        text += c;
        if (c == '\n' && (text == "end\n" ||
                          (text.size() >= 5 && text.compare(text.size() - 5, 5, "\nend\n") == 0)))
            break;
        if (text.size() > (16u << 20)) break;
    }
    LaunchSettings s;
    try {
        s = LaunchSettings::parse(text);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sky launcher: %s\n", e.what());
        return 2;
    }
    std::fill(text.begin(), text.end(), '\0');
    return Launcher(std::move(s)).run();
}

}  // namespace sky::detail
