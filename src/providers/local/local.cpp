// sky::Local: nodes are worker processes of this same executable, connected by a socketpair.
// Each node reports what a cloud node reports, in the same order: InstanceProvisioned, then
// BootstrapStarting, its bootstrap steps (what Local applies of the image, and what it skips),
// "worker", BootstrapCompleted.
#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "ledger/ledger.hpp"
#include "pool/backend.hpp"
#include "providers/local/local_image.hpp"
#include "providers/local/local_worker.hpp"
#include "providers/local/provider.hpp"

namespace sky::detail {

void collect_local_pools(std::vector<GcPool> pools, const GcOptions& options);  // local_gc.cpp

namespace {

class LocalBackend final : public Backend {
public:
    LocalBackend(const PoolSpec& spec, std::string pool_id, Ledger* ledger)
        : spec_(spec),
          cfg_(*spec.provider.get<Local>()),
          pool_id_(std::move(pool_id)),
          ledger_(ledger),
          image_(spec.image) {
        // The image's venv is active for the worker, as env.sh makes it on a node; the image's
        // own env (and the pool's) may still set these.
        for (auto& [k, v] : image_.worker_env()) spec_.image.env.emplace(k, v);
    }
    ~LocalBackend() override { stop_all(); }

    void provision(int nodes, const std::function<void(Event)>& emit) override {
        std::lock_guard lk(m_);
        workers_.resize(static_cast<std::size_t>(nodes));
        generations_.resize(static_cast<std::size_t>(nodes));
        emit(InstanceLaunching{nodes, "local", "local"});
    }

    void add(const std::vector<int>& nodes, const std::function<void(Event)>& emit) override {
        {
            std::lock_guard lk(m_);
            for (int i : nodes) {
                if (i < 0) throw ConfigError(fmt::format("sky::Local: no node {}", i));
                const auto need = static_cast<std::size_t>(i) + 1;
                if (workers_.size() < need) {
                    workers_.resize(need);
                    generations_.resize(need);
                }
            }
        }
        emit(InstanceLaunching{static_cast<int>(nodes.size()), "local", "local"});
    }

    void release(int node) override {
        std::unique_ptr<LocalWorker> w;
        {
            std::lock_guard lk(m_);
            if (node < 0 || static_cast<std::size_t>(node) >= workers_.size()) return;
            w = std::move(workers_[static_cast<std::size_t>(node)]);
        }
        if (!w) return;
        const int pid = w->pid();
        w->stop();  // reaped: the process is gone
        std::lock_guard lk(m_);
        if (ledger_ && pid > 0 && std::erase(recorded_pids_, pid) > 0)
            ledger_->instance_gone(fmt::format("local-{}", pid));
    }

    NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        int generation = 0;
        {
            std::lock_guard lk(m_);
            generation = generations_.at(static_cast<std::size_t>(node))++;
        }
        // A restarted worker is a fresh process in the node's place: a new instance, announced
        // and bootstrapped like the first (the machine's work is not done again).
        std::string id = fmt::format("local-{}-{}{}", pool_id_, node,
                                     generation ? fmt::format("-r{}", generation) : "");
        emit(InstanceProvisioned{id, node, false, "local", std::string("127.0.0.1"),
                                 std::string("local"), 0.0, std::nullopt});
        emit(BootstrapStarting{id});
        image_.apply(node, id, emit);
        emit(BootstrapProgress{id, "worker"});
        LocalWorker* w = nullptr;
        try {
            bool fresh = false;
            {
                std::lock_guard lk(m_);
                auto& slot = workers_.at(static_cast<std::size_t>(node));
                if (!slot) {
                    slot = std::make_unique<LocalWorker>(spec_, cfg_.workdir, pool_id_);
                    fresh = true;
                }
                w = slot.get();
            }
            if (!fresh) w->restart_worker(emit);
        } catch (const std::exception& e) {
            throw BootstrapError(node, id, "worker", "could not start the worker", {e.what()});
        }
        if (const int pid = w->pid(); ledger_ && pid > 0) {
            ledger_->instance(fmt::format("local-{}", pid));
            std::lock_guard lk(m_);
            recorded_pids_.push_back(pid);
        }
        NodeStart s;
        s.instance.id = id;
        s.instance.node = node;
        s.instance.provider = "local";
        s.instance.instance_type = "local";
        s.instance.private_ip = "127.0.0.1";
        s.instance.public_ip = std::nullopt;
        s.token = w->token();
        s.seal = local_seal();
        s.stream = w->connect_worker();
        emit(BootstrapCompleted{id});
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

    void begin_stop() noexcept override { image_.cancel(); }

    void stop_all() noexcept override {
        if (stopped_.exchange(true)) return;  // once (backend.hpp)
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
        image_.remove_files();  // the workers that read them are gone
    }

private:
    PoolSpec spec_;
    Local cfg_;
    std::string pool_id_;
    std::mutex m_;
    std::atomic<bool> stopped_{false};  // stop_all() ran: it runs once
    std::vector<std::unique_ptr<LocalWorker>>
        workers_;                     // a node's worker lives as long as the pool
    std::vector<int> generations_;    // starts per node: the instance id's suffix
    Ledger* ledger_ = nullptr;        // the pool's write-ahead ledger (may be null)
    std::vector<int> recorded_pids_;  // in the ledger and not yet recorded gone
    LocalImage image_;                // what the nodes apply of spec.image, once for the pool
};

}  // namespace

ProviderDescriptor local_provider() {
    ProviderDescriptor d({
        .exposure = [](const PoolSpec&) { return this_machine_exposure(); },
        .billing = BillingPolicy{},  // the user's own machine: its hourly rate is 0
        .runs_on_this_machine = true,
    });
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return std::make_unique<LocalBackend>(c.spec, c.pool_id, c.ledger);
    };
    d.collect = collect_local_pools;
    return d;
}

}  // namespace sky::detail
