// sky::Local: nodes are worker processes of this same executable, connected by
// a socketpair.
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "pool/backend.hpp"
#include "providers/local/spawner.hpp"
#include "providers/registry/registry.hpp"
#include "runtime/auth.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/worker.hpp"

extern char** environ;

namespace sky::detail {

namespace {

// Environment variables that hold a compute provider's credentials (or say
// where to find them): a Local worker runs the user's functions and whatever
// they start, none of which needs sky's cloud access. PoolSpec::env and
// Image::env pass one explicitly when a function does need it.
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

struct Proc {
    int pid = -1;
    int status = 0;
    bool reaped = false;
    int generation = 0;
    std::string instance_id;
};

class LocalBackend final : public Backend {
public:
    LocalBackend(const PoolSpec& spec, std::string pool_id)
        : spec_(spec), cfg_(*spec.provider.get<Local>()), pool_id_(std::move(pool_id)) {}
    ~LocalBackend() override { stop_all(); }

    void provision(int nodes, const std::function<void(Event)>& emit) override {
        std::lock_guard lk(m_);
        procs_.resize(static_cast<std::size_t>(nodes));
        emit(InstanceLaunching{nodes, "local", "local"});
    }

    NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        {
            // A replacement: the last worker of this node may still exist (frozen, or
            // cut off): it ends before the new one starts.
            std::lock_guard lk(m_);
            auto& p = procs_.at(static_cast<std::size_t>(node));
            if (p.pid > 0 && !p.reaped) {
                ::kill(p.pid, SIGKILL);
                ::waitpid(p.pid, &p.status, 0);
                p.reaped = true;
            }
        }
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
            if (std::strncmp(*e, "SKY_WORKER_", 11) != 0 &&
                std::strncmp(*e, "SKY_PARENT_", 11) != 0 && !is_provider_credential(name))
                req.env.emplace_back(*e);
        }
        for (auto& [k, v] : spec_.image.env) req.env.push_back(k + "=" + v);
        for (auto& [k, v] : spec_.env) req.env.push_back(k + "=" + v);
        req.env.push_back("SKY_WORKER_FD=3");
        req.env.push_back("SKY_WORKER_TOKEN=" + token);
        req.env.push_back(fmt::format("SKY_PARENT_PID={}", ::getpid()));
        req.workdir = cfg_.workdir;
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
        std::string id;
        {
            std::lock_guard lk(m_);
            auto& p = procs_.at(static_cast<std::size_t>(node));
            id = fmt::format("local-{}-{}{}", pool_id_, node,
                             p.generation ? fmt::format("-r{}", p.generation) : "");
            p = Proc{pid, 0, false, p.generation + 1, id};
        }
        NodeStart s;
        s.instance.id = id;
        s.instance.node = node;
        s.instance.provider = "local";
        s.instance.instance_type = "local";
        s.instance.private_ip = "127.0.0.1";
        s.instance.public_ip = std::nullopt;
        s.token = token;
        s.transport = std::make_unique<FdTransport>(sv[0], fmt::format("worker pid {}", pid));
        emit(InstanceProvisioned{id, node, false, "local", std::string("127.0.0.1"),
                                 std::string("local"), 0.0, std::nullopt});
        return s;
    }

    NodeExit exit_reason(int node) override {
        Proc p;
        {
            std::lock_guard lk(m_);
            p = procs_.at(static_cast<std::size_t>(node));
        }
        // The connection closed; the process is usually on its way out. Wait a
        // little for it.
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!p.reaped && std::chrono::steady_clock::now() < until) {
            int st = 0;
            int r = ::waitpid(p.pid, &st, WNOHANG);
            if (r == p.pid) {
                p.reaped = true;
                p.status = st;
                std::lock_guard lk(m_);
                auto& q = procs_.at(static_cast<std::size_t>(node));
                if (q.pid == p.pid) {
                    q.reaped = true;
                    q.status = st;
                }
                break;
            }
            if (r < 0) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (!p.reaped)
            return {NodeLostError::Reason::unreachable, "the connection to the worker closed"};
        if (WIFSIGNALED(p.status)) {
            int sig = WTERMSIG(p.status);
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("worker process {} was killed by signal {} ({})", p.pid, sig,
                                strsignal(sig))};
        }
        int code = WEXITSTATUS(p.status);
        if (code != 0)
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("worker process {} exited with status {}", p.pid, code)};
        return {NodeLostError::Reason::unreachable, fmt::format("worker process {} exited", p.pid)};
    }

    bool can_restart(int) const override { return true; }

    void stop_all() noexcept override {
        std::vector<int> pids;
        {
            std::lock_guard lk(m_);
            for (auto& p : procs_)
                if (p.pid > 0 && !p.reaped) pids.push_back(p.pid);
        }
        // They were asked to shut down; give them a moment, then make sure.
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
        std::vector<int> left = pids;
        while (!left.empty() && std::chrono::steady_clock::now() < until) {
            std::erase_if(left, [](int pid) {
                int st;
                int r = ::waitpid(pid, &st, WNOHANG);
                return r == pid || r < 0;
            });
            if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        for (int pid : left) {
            ::kill(pid, SIGKILL);
            int st;
            ::waitpid(pid, &st, 0);
        }
        std::lock_guard lk(m_);
        for (auto& p : procs_) p.reaped = true;
    }

private:
    PoolSpec spec_;
    Local cfg_;
    std::string pool_id_;
    std::mutex m_;
    std::vector<Proc> procs_;
};

}  // namespace

ProviderDescriptor local_provider() {
    ProviderDescriptor d;
    d.name = "local";
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return std::make_unique<LocalBackend>(c.spec, c.pool_id);
    };
    return d;
}

}  // namespace sky::detail
