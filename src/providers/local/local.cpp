// sky::Local: nodes are worker processes of this same executable, connected by a socketpair.
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <vector>

#include "pool/backend.hpp"
#include "pool/ledger.hpp"
#include "providers/local/local_worker.hpp"
#include "providers/registry/registry.hpp"

namespace sky::detail {


namespace {

class LocalBackend final : public Backend {
public:
    LocalBackend(const PoolSpec& spec, std::string pool_id, Ledger* ledger)
        : spec_(spec), cfg_(*spec.provider.get<Local>()), pool_id_(std::move(pool_id)),
          ledger_(ledger) {
        // Each worker's environment names its pool: `sky gc` kills a dead client's leftover
        // worker only when /proc/PID/environ proves it is that pool's.
        spec_.env["SKY_PARENT_POOL"] = pool_id_;
    }
    ~LocalBackend() override { stop_all(); }


    void provision(int nodes, const std::function<void(Event)>& emit) override {
        std::lock_guard lk(m_);
        workers_.resize(static_cast<std::size_t>(nodes));
        generations_.resize(static_cast<std::size_t>(nodes));
        emit(InstanceLaunching{nodes, "local", "local"});
    }

    NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        LocalWorker* w = nullptr;
        int generation = 0;
        {
            std::lock_guard lk(m_);
            auto& slot = workers_.at(static_cast<std::size_t>(node));
            if (!slot) slot = std::make_unique<LocalWorker>(spec_, cfg_.workdir);
            w = slot.get();
            generation = generations_.at(static_cast<std::size_t>(node))++;
        }
        if (generation > 0) w->restart_worker(emit);  // a fresh process in the node's place
        if (const int pid = w->pid(); ledger_ && pid > 0) {
            ledger_->instance(fmt::format("local-{}", pid));
            std::lock_guard lk(m_);
            recorded_pids_.push_back(pid);
        }
        std::string id = fmt::format("local-{}-{}{}", pool_id_, node,
                                     generation ? fmt::format("-r{}", generation) : "");
        NodeStart s;
        s.instance.id = id;
        s.instance.node = node;
        s.instance.provider = "local";
        s.instance.instance_type = "local";
        s.instance.private_ip = "127.0.0.1";
        s.instance.public_ip = std::nullopt;
        s.token = w->token();
        s.transport = w->connect_worker();
        emit(InstanceProvisioned{id, node, false, "local", std::string("127.0.0.1"),
                                 std::string("local"), 0.0, std::nullopt});
        return s;
    }

    NodeExit exit_reason(int node) override {
        LocalWorker* w = nullptr;
        {
            std::lock_guard lk(m_);
            w = workers_.at(static_cast<std::size_t>(node)).get();
        }
        if (!w) return {NodeLostError::Reason::unreachable, "the worker was never started"};
        return w->exit_reason();
    }

    bool can_restart(int) const override { return true; }

    void stop_all() noexcept override {
        std::vector<LocalWorker*> all;
        {
            std::lock_guard lk(m_);
            for (auto& w : workers_)
                if (w) all.push_back(w.get());
        }
        LocalWorker::stop_all(all);
        // Every process this pool started has been reaped (a restart reaps the one it replaces).
        std::lock_guard lk(m_);
        if (ledger_)
            for (int pid : recorded_pids_) ledger_->instance_gone(fmt::format("local-{}", pid));
        recorded_pids_.clear();
    }

private:
    PoolSpec spec_;
    Local cfg_;
    std::string pool_id_;
    std::mutex m_;
    std::vector<std::unique_ptr<LocalWorker>> workers_;  // a node's worker lives as long as the pool
    std::vector<int> generations_;                       // starts per node: the instance id's suffix
    Ledger* ledger_ = nullptr;        // the pool's write-ahead ledger (may be null)
    std::vector<int> recorded_pids_;  // in the ledger and not yet recorded gone
};

}  // namespace

ProviderDescriptor local_provider() {
    ProviderDescriptor d;
    d.name = "local";
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return std::make_unique<LocalBackend>(c.spec, c.pool_id, c.ledger);
    };
    return d;
}

}  // namespace sky::detail
