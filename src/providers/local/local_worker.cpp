#include "providers/local/local_worker.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>
#include <vector>

#include "io/fd_stream.hpp"
#include "runtime/auth.hpp"
#include "runtime/crash_report.hpp"
#include "runtime/spawner.hpp"
#include "runtime/worker.hpp"
#include "runtime/worker_launch.hpp"

extern char** environ;

namespace sky::detail {

bool local_seal() {
    const char* v = std::getenv("SKY_LOCAL_SEAL");
    return v && std::string_view(v) == "1";
}

bool is_provider_credential(std::string_view name) {
    static constexpr std::string_view prefixes[] = {"AWS_", "VERDA_", "DATACRUNCH_"};
    static constexpr std::string_view names[] = {"RUNPOD_API_KEY",
                                                 "VAST_API_KEY",
                                                 "VASTAI_API_KEY",
                                                 "DIGITALOCEAN_TOKEN",
                                                 "DIGITALOCEAN_ACCESS_TOKEN",
                                                 "DO_TOKEN"};
    for (auto p : prefixes)
        if (name.substr(0, p.size()) == p) return true;
    for (auto n : names)
        if (name == n) return true;
    return false;
}

namespace {
std::string crash_file_in(const std::string& dir) { return dir.empty() ? "" : dir + "/crash"; }
}  // namespace

LocalWorker::LocalWorker(const PoolSpec& spec, std::string workdir, std::string pool_id)
    : spec_(spec), workdir_(std::move(workdir)), pool_id_(std::move(pool_id)) {
    // Where the worker leaves its crash report: a directory only this user can enter.
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/sky-worker-XXXXXX";
    if (::mkdtemp(dir.data())) crash_dir_ = dir;
    std::lock_guard lk(m_);
    start();
}

LocalWorker::~LocalWorker() {
    stop();
    // Its crash file and those of its worker processes (crash.<k>), all ours to remove.
    std::error_code ec;
    if (!crash_dir_.empty()) std::filesystem::remove_all(crash_dir_, ec);
}

void LocalWorker::start() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw Error(fmt::format("socketpair: {}", std::strerror(errno)));
    std::string token = random_hex(32);
    SpawnRequest req;
    req.path = "/proc/self/exe";
    req.argv = {program_name(), worker_flag};
    for (char** e = environ; e && *e; ++e) {
        const std::string_view entry(*e);
        const std::string_view name = entry.substr(0, entry.find('='));
        // A name the image or the pool sets is theirs: an environment block with a name
        // twice gives getenv() the first, the inherited one.
        const std::string key(name);
        if (spec_.env.count(key) || spec_.image.env.count(key)) continue;
        if (!WorkerLaunch::is_launch_variable(entry) && !is_provider_credential(name))
            req.env.emplace_back(*e);
    }
    for (auto& [k, v] : spec_.image.env)
        if (!spec_.env.count(k))
            req.env.push_back(k + "=" + v);  // the pool's env wins, as on a node
    for (auto& [k, v] : spec_.env) req.env.push_back(k + "=" + v);
    // A report from the previous worker must not pass for this one's.
    if (!crash_dir_.empty()) ::unlink(crash_file_in(crash_dir_).c_str());
    for (auto& v : WorkerLaunch{.fd = 3,
                                .token = token,
                                .crash_file = crash_file_in(crash_dir_),
                                .seal = local_seal(),
                                .parent_pid = ::getpid(),
                                .parent_pool = pool_id_}
                       .env())
        req.env.push_back(std::move(v));
    req.workdir = workdir_;
    req.child_fd = sv[1];
    int pid = -1;
    try {
        pid = spawn_process(req);
    } catch (...) {
        ::close(sv[0]);
        ::close(sv[1]);
        throw;
    }
    ::close(sv[1]);
    pid_ = pid;
    status_ = 0;
    reaped_ = false;
    token_ = std::move(token);
    pending_ = std::make_unique<io::FdStream>(sv[0], fmt::format("worker pid {}", pid));
}

std::unique_ptr<io::Stream> LocalWorker::connect_worker() {
    std::lock_guard lk(m_);
    if (!pending_)
        throw Error(fmt::format("worker process {}: its connection was taken already", pid_));
    return std::move(pending_);
}

void LocalWorker::restart_worker(const std::function<void(Event)>&) {
    std::lock_guard lk(m_);
    kill_locked();
    pending_.reset();
    start();
}

bool LocalWorker::reap_locked(bool wait) noexcept {
    if (reaped_) return true;
    int st = 0;
    int r = ::waitpid(pid_, &st, wait ? 0 : WNOHANG);
    if (r == pid_) {
        reaped_ = true;
        status_ = st;
    } else if (r < 0 && errno == ECHILD) {
        reaped_ = true;  // not ours to wait for any more: never signal it again
    }
    return reaped_;
}

void LocalWorker::kill_locked() noexcept {
    if (reaped_ || pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    reap_locked(true);
}

NodeExit LocalWorker::exit_reason() {
    int pid = -1;
    // The connection closed; the process is usually on its way out. Wait a little for it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (;;) {
        {
            std::lock_guard lk(m_);
            pid = pid_;
            if (reap_locked(false)) break;
        }
        if (std::chrono::steady_clock::now() >= until)
            return {NodeLostError::Reason::unreachable, "the connection to the worker closed"};
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    int status = 0;
    {
        std::lock_guard lk(m_);
        status = status_;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        return {
            NodeLostError::Reason::worker_crashed,
            fmt::format("worker process {} was killed by signal {} ({})", pid, sig, strsignal(sig)),
            read_crash_file(crash_file_in(crash_dir_))};
    }
    int code = WEXITSTATUS(status);
    if (code != 0)
        return {NodeLostError::Reason::worker_crashed,
                fmt::format("worker process {} exited with status {}", pid, code),
                // A node's worker that passed on the report of a worker process of its own.
                read_crash_file(crash_file_in(crash_dir_))};
    return {NodeLostError::Reason::unreachable, fmt::format("worker process {} exited", pid)};
}

void LocalWorker::stop() noexcept {
    LocalWorker* self = this;
    stop_all(std::span<LocalWorker* const>(&self, 1));
}

void LocalWorker::stop_all(std::span<LocalWorker* const> workers) noexcept {
    // They were asked to shut down; give them a moment, then make sure.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    for (;;) {
        bool left = false;
        for (LocalWorker* w : workers) {
            std::lock_guard lk(w->m_);
            w->pending_.reset();  // a worker never connected to sees the end of its stream
            left = !w->reap_locked(false) || left;
        }
        if (!left || std::chrono::steady_clock::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (LocalWorker* w : workers) {
        std::lock_guard lk(w->m_);
        w->kill_locked();
    }
}

int LocalWorker::pid() const {
    std::lock_guard lk(m_);
    return reaped_ ? -1 : pid_;
}

bool LocalWorker::signal(int sig) {
    std::lock_guard lk(m_);
    if (reaped_ || pid_ <= 0) return false;
    return ::kill(pid_, sig) == 0;
}

}  // namespace sky::detail
