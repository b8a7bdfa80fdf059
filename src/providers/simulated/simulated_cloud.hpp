#pragma once
// sky::Simulated's cloud of one pool: a table of machines with their faults (capacity errors,
// preemptions with or without a notice, lost nodes, frozen machines, failing or slow bootstraps),
// as the cloud layer's adapter (simulated.cpp) and the node starter (simulated_node.cpp) see it.

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "io/stream.hpp"
#include "ledger/ledger.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/cloud/collect.hpp"
#include "providers/local/local_worker.hpp"
#include "providers/simulated/machine_records.hpp"
#include "runtime/protocol.hpp"
#include "sky/catalog.hpp"
#include "sky/cloud.hpp"
#include "sky/detail/registry.hpp"
#include "util/private_files.hpp"

namespace sky::detail::simulated {

using Clock = std::chrono::steady_clock;
using State = CloudInstance::State;
using nlohmann::json;
namespace fs = std::filesystem;

struct FaultSlot {
    Fault fault;
    bool done = false;    // fired (each fault fires once)
    bool warned = false;  // preempt with a notice: the warning was given
    std::string machine;  // lose_after_calls: the machine that counts for it
};

struct Machine {
    CloudInstance info;
    int node = 0;
    int calls = 0;  // completed calls since its worker first started
    bool frozen = false;
    bool claimed_calls = false;     // it took its node's next lose_after_calls fault
    LocalWorker* worker = nullptr;  // while its node handle lives
    /// The pool's events, from the node's start: where the cloud's warning goes.
    std::function<void(Event)> emit;
};

class SimCloud {
public:
    SimCloud(Simulated config, std::string pool_id)
        : config_(std::move(config)),
          pool_id_(std::move(pool_id)),
          rng_(config_.seed),
          owner_start_(process_identity(::getpid())) {
        for (const Fault& f : config_.faults) faults_.push_back({f, false, {}});
    }

    ~SimCloud() {
        start_watch_.reset();
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_all();
        if (timer_.joinable()) timer_.join();
    }

    SimCloud(const SimCloud&) = delete;
    SimCloud& operator=(const SimCloud&) = delete;

    std::string launch(const LaunchRequest& r) {
        std::lock_guard lk(m_);
        ++launches_;
        if (launches_ <= config_.capacity_errors)
            throw CapacityError(fmt::format(
                "InsufficientInstanceCapacity: there is no {} capacity for {} in {} right now "
                "(simulated: launch attempt {} of the {} that find none)",
                r.spot ? "spot" : "on-demand", r.offer.instance_type, kRegion, launches_,
                config_.capacity_errors));
        Machine m;
        do {
            m.info.id = fmt::format("sim-{}-{:08x}", pool_id_, rng_() & 0xffffffffu);
        } while (machines_.count(m.info.id));
        m.info.state = State::pending;
        m.info.public_ip = m.info.private_ip = "127.0.0.1";
        m.info.spot = r.spot;
        m.info.pool_id = r.pool_id;
        m.info.instance_type = r.offer.instance_type;
        m.node = r.node;
        const std::string id = m.info.id;
        machines_.emplace(id, std::move(m));
        write_record(record_locked(machines_.at(id)));
        return id;
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) {
        std::vector<CloudInstance> out;
        std::vector<std::string> elsewhere;
        {
            std::lock_guard lk(m_);
            for (const auto& id : ids) {
                auto it = machines_.find(id);
                if (it == machines_.end()) {
                    elsewhere.push_back(id);
                    continue;
                }
                // A machine runs from the first time the cloud is asked about it.
                if (it->second.info.state == State::pending) it->second.info.state = State::running;
                out.push_back(it->second.info);
            }
        }
        for (const auto& id : elsewhere) out.push_back(describe_record(id));
        return out;
    }

    void terminate(const std::vector<std::string>& ids) {
        std::vector<std::string> elsewhere;
        {
            std::lock_guard lk(m_);
            for (const auto& id : ids) {
                auto it = machines_.find(id);
                if (it == machines_.end()) {
                    elsewhere.push_back(id);
                    continue;
                }
                end_locked(it->second, false, "terminated by its pool");
            }
        }
        for (const auto& id : elsewhere) terminate_record(id);
    }

    std::vector<CloudInstance> list(std::string_view pool) {
        std::vector<CloudInstance> out;
        std::set<std::string> mine;
        {
            std::lock_guard lk(m_);
            for (auto& [id, m] : machines_) {
                mine.insert(id);
                if (m.info.state != State::gone && (pool.empty() || m.info.pool_id == pool))
                    out.push_back(m.info);
            }
        }
        for (const Record& r : all_records()) {
            if (mine.count(r.id) || (!pool.empty() && r.pool != pool)) continue;
            if (record_alive(r))
                out.push_back(instance_of(r, true));
            else
                remove_record(r.id);  // its process ended long ago: nothing is left of it
        }
        return out;
    }

    // --- The node side.

    struct BootFaults {
        std::optional<std::string> fail;  // the failing phase's output
        std::chrono::milliseconds delay{0};
    };

    // The bootstrap faults of the node's next start (each fault is used once).
    BootFaults claim_boot_faults(int node) {
        std::lock_guard lk(m_);
        BootFaults b;
        for (auto& s : faults_) {
            if (s.done || s.fault.node != node) continue;
            if (s.fault.kind == Fault::Kind::fail_bootstrap && !b.fail) {
                b.fail = s.fault.message;
                s.done = true;
            } else if (s.fault.kind == Fault::Kind::slow_bootstrap && b.delay.count() == 0) {
                b.delay = s.fault.delay;
                s.done = true;
            }
        }
        return b;
    }

    // A worker (re)started on the machine: the node is served by this machine from now on.
    void attach(const std::string& id, LocalWorker* w, const std::function<void(Event)>& emit) {
        std::lock_guard lk(m_);
        auto it = machines_.find(id);
        if (it == machines_.end()) return;
        Machine& m = it->second;
        m.worker = w;
        if (emit) m.emit = emit;
        node_machine_[m.node] = id;
        if (!m.claimed_calls) {
            m.claimed_calls = true;
            for (auto& s : faults_)
                if (!s.done && s.machine.empty() && s.fault.node == m.node &&
                    s.fault.kind == Fault::Kind::lose_after_calls) {
                    s.machine = id;
                    break;
                }
        }
        write_record(record_locked(m));
    }

    void detach(const std::string& id, const LocalWorker* w) {
        std::lock_guard lk(m_);
        auto it = machines_.find(id);
        if (it != machines_.end() && it->second.worker == w) it->second.worker = nullptr;
    }

    // The pool's PoolStarted: the clock of the timed faults starts. Watched as a global event
    // callback, since only the pool knows when every node has also finished its handshake (a
    // fault before that would fail the pool's start instead of striking a running pool).
    static void watch_start(const std::shared_ptr<SimCloud>& cloud) {
        std::weak_ptr<SimCloud> weak = cloud;
        const std::string pool = cloud->pool_id_;
        cloud->start_watch_.emplace(
            use_callback([weak, pool](const Event& e) -> std::optional<Event> {
                if (auto* p = std::get_if<PoolStarted>(&e); p && p->pool_id == pool)
                    if (auto c = weak.lock()) c->pool_started();
                return std::nullopt;
            }));
    }

    void pool_started() {
        std::lock_guard lk(m_);
        if (started_at_) return;
        started_at_ = Clock::now();
        const bool timed = std::any_of(faults_.begin(), faults_.end(),
                                       [](const FaultSlot& s) { return is_timed(s.fault.kind); });
        if (timed) timer_ = std::thread([this] { timer_loop(); });
    }

    void call_completed(const std::string& id) {
        std::lock_guard lk(m_);
        auto it = machines_.find(id);
        if (it == machines_.end()) return;
        Machine& m = it->second;
        ++m.calls;
        for (auto& s : faults_)
            if (!s.done && s.machine == id && m.calls >= s.fault.calls) {
                s.done = true;
                end_locked(
                    m, false,
                    fmt::format("the machine failed after {} calls (simulated fault)", m.calls));
            }
    }

    // Whether a fresh worker can start on the machine (it runs and answers).
    bool machine_up(const std::string& id) {
        std::lock_guard lk(m_);
        auto it = machines_.find(id);
        return it != machines_.end() && it->second.info.state == State::running &&
               !it->second.frozen;
    }

    bool machine_gone(const std::string& id) {
        std::lock_guard lk(m_);
        auto it = machines_.find(id);
        return it == machines_.end() || it->second.info.state == State::gone;
    }

private:
    static bool is_timed(Fault::Kind k) {
        return k == Fault::Kind::preempt || k == Fault::Kind::lose || k == Fault::Kind::freeze;
    }

    Record record_locked(const Machine& m) const {
        Record r;
        r.id = m.info.id;
        r.pool = m.info.pool_id;
        r.instance_type = m.info.instance_type;
        r.node = m.node;
        r.spot = m.info.spot;
        r.owner_pid = ::getpid();
        r.owner_start = owner_start_;
        if (m.worker) {
            r.worker_pid = m.worker->pid();
            r.worker_start = process_identity(r.worker_pid);
        }
        return r;
    }

    // The machine is gone: its worker process dies with it (the LocalWorker reaps it).
    void end_locked(Machine& m, bool preempted, const std::string& reason) {
        if (m.info.state == State::gone) return;
        m.info.state = State::gone;
        m.info.preempted = preempted;
        m.info.reason = reason;
        if (m.worker) m.worker->signal(SIGKILL);
        m.emit = nullptr;
        remove_record(m.info.id);
    }

    void timer_loop() {
        std::unique_lock lk(m_);
        while (!stop_) {
            // The next timed fault due, in the order of their times (then as listed).
            // A preempt fault with a notice is due twice: its warning at after - notice, then
            // the reclaim.
            const auto due_of = [](const FaultSlot& s) {
                return s.fault.kind == Fault::Kind::preempt && s.fault.notice.count() > 0 &&
                               !s.warned
                           ? s.fault.after - s.fault.notice
                           : s.fault.after;
            };
            FaultSlot* next = nullptr;
            for (auto& s : faults_)
                if (!s.done && is_timed(s.fault.kind) && (!next || due_of(s) < due_of(*next)))
                    next = &s;
            if (!next) return;
            auto due = *started_at_ + due_of(*next);
            if (Clock::now() < due) {
                cv_.wait_until(lk, due, [&] { return stop_; });
                continue;
            }
            // It hits the machine that serves its node now; while the node is being replaced
            // it waits for the new one.
            Machine* m = nullptr;
            if (auto n = node_machine_.find(next->fault.node); n != node_machine_.end())
                if (auto it = machines_.find(n->second); it != machines_.end() &&
                                                         it->second.info.state == State::running &&
                                                         it->second.worker && !it->second.frozen)
                    m = &it->second;
            if (!m) {
                cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return stop_; });
                continue;
            }
            if (next->fault.kind == Fault::Kind::preempt && next->fault.notice.count() > 0 &&
                !next->warned) {
                next->warned = true;
                warn_locked(lk, *m, *started_at_ + next->fault.after);
                continue;
            }
            next->done = true;
            switch (next->fault.kind) {
                case Fault::Kind::preempt:
                    end_locked(*m, true,
                               "Server.SpotInstanceTermination: the cloud reclaimed the spot "
                               "capacity (simulated fault)");
                    break;
                case Fault::Kind::lose:
                    end_locked(*m, false, "the machine failed (simulated fault)");
                    break;
                case Fault::Kind::freeze:
                    // The machine stays "running" for the cloud; its worker stops answering.
                    m->frozen = true;
                    if (m->worker) m->worker->signal(SIGSTOP);
                    break;
                default:
                    break;
            }
        }
    }

    // The cloud's warning that machine `m` is reclaimed at `at`, as AWS's instance-action
    // gives it: to the pool, outside the lock (the pool's handlers never call back here).
    void warn_locked(std::unique_lock<std::mutex>& lk, const Machine& m, Clock::time_point at) {
        PreemptionNotice n;
        n.node = m.node;
        n.instance_id = m.info.id;
        n.deadline =
            std::chrono::system_clock::now() +
            std::chrono::duration_cast<std::chrono::system_clock::duration>(at - Clock::now());
        n.reason =
            "spot instance-action: terminate (simulated fault: the cloud reclaims the spot "
            "capacity)";
        const auto emit = m.emit;
        if (!emit) return;
        lk.unlock();
        try {
            emit(std::move(n));
        } catch (...) {
            // The pool is going: nobody is left to warn.
        }
        lk.lock();
    }

    const Simulated config_;
    const std::string pool_id_;

    std::mutex m_;
    std::condition_variable cv_;
    std::mt19937_64 rng_;
    const std::string owner_start_;
    int launches_ = 0;
    std::map<std::string, Machine> machines_;
    std::map<int, std::string> node_machine_;
    std::vector<FaultSlot> faults_;
    std::optional<Clock::time_point> started_at_;
    std::optional<CallbackGuard> start_watch_;
    bool stop_ = false;
    std::thread timer_;
};

}  // namespace sky::detail::simulated
