#pragma once
// An in-memory cloud behind the public adapter interface (sky/cloud.hpp): machines that start
// pending and run after a describe, capacity per instance type (spot and on-demand apart),
// launch answers that get lost, preemption, and a log of every call. It drives the cloud layer
// in unit tests without root, SSH or HTTP; `live()` counts what would still be billed.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sky/cloud.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace sky::test {

struct FakeCloudState {
    struct Machine {
        CloudInstance info;
        int describes_until_running = 1;
    };
    mutable std::mutex m;
    std::map<std::string, Machine> machines;
    std::map<std::string, int> capacity;       ///< on-demand machines left per type (absent: any)
    std::map<std::string, int> spot_capacity;  ///< spot machines left per type (absent: any)
    std::set<std::string> broken_types;        ///< launch fails with a non-capacity error
    std::set<std::string> unknown_types;       ///< launch refuses the type as unknown
    int lose_launch_answers = 0;  ///< the next N launches start a machine, then lose its answer
    /// The next N launches lose their answer before the cloud starts anything.
    int lose_launch_requests = 0;
    int lose_after = 0;  ///< launches answered before the losses above begin
    /// A machine whose answer was lost shows in list() only after this many list() calls.
    int lost_machine_hidden_lists = 0;
    std::chrono::seconds lost_launch_wait{10};  ///< login().lost_launch_wait
    /// The pool's firewall stays in use for this many delete_infra() calls after create_infra()
    /// (a terminated machine's interface lingering); -1: until released by hand.
    int infra_busy_deletes = 0;
    std::set<std::string> infra;           ///< pools whose firewall exists
    std::chrono::seconds infra_wait{120};  ///< login().infra_wait
    /// describe() reports this host key for running machines (a cloud that vouches for it).
    std::string reported_host_key;
    /// Set: the cloud refuses every request (credentials it no longer accepts). create_infra(),
    /// list() and launch() call it (it throws what the cloud's adapter would), delete_infra()
    /// deletes nothing and infra_left() cannot tell. Every call is still logged.
    std::function<void()> refuse;
    std::vector<std::string> log;  ///< "launch small spot", "terminate i-1", ...
    int next_id = 0;
    std::map<std::string, int> hidden;  ///< list() calls a lost machine stays out of, by id

    [[nodiscard]] int live() const {
        std::lock_guard lk(m);
        return static_cast<int>(std::count_if(machines.begin(), machines.end(), [](auto& kv) {
            return kv.second.info.state != CloudInstance::State::gone;
        }));
    }
    [[nodiscard]] int count(const std::string& prefix) const {
        std::lock_guard lk(m);
        return static_cast<int>(std::count_if(
            log.begin(), log.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
    }
    [[nodiscard]] std::vector<std::string> live_types() const {
        std::lock_guard lk(m);
        std::vector<std::string> v;
        for (auto& [id, mc] : machines)
            if (mc.info.state != CloudInstance::State::gone) v.push_back(mc.info.instance_type);
        return v;
    }
    /// The cloud takes a machine back.
    void preempt(const std::string& id) {
        std::lock_guard lk(m);
        auto& i = machines.at(id).info;
        i.state = CloudInstance::State::gone;
        i.preempted = true;
        i.reason = "spot capacity reclaimed";
    }
};

/// Three offers: "small" ($1/h, spot $0.30), "medium" ($2/h, spot $0.50), "large" ($3/h, no
/// spot market).
class FakeCloud : public CloudAdapter {
public:
    explicit FakeCloud(std::shared_ptr<FakeCloudState> s) : s_(std::move(s)) {}

    std::string name() const override { return "fakecloud"; }
    std::string region() const override { return "fake-1"; }

    std::vector<Offer> live_offers(const Catalog&, const SelectionRequest&,
                                   const std::function<void(Event)>&) override {
        auto offer = [](std::string type, double od, std::optional<double> spot) {
            Offer o;
            o.provider = "fakecloud";
            o.instance_type = std::move(type);
            o.vcpus = 4;
            o.memory_gb = 16;
            o.region = "fake-1";
            o.on_demand_price = od;
            o.spot_price = spot;
            o.spot_available = spot.has_value();
            o.prices_date = "2026-11-23";
            return o;
        };
        return {offer("small", 1.0, 0.30), offer("medium", 2.0, 0.50),
                offer("large", 3.0, std::nullopt)};
    }

    void create_infra(const InfraRequest& r, const std::function<void(Event)>&) override {
        std::lock_guard lk(s_->m);
        s_->log.push_back("create_infra " + r.pool_id);
        if (s_->refuse) s_->refuse();
        s_->infra.insert(r.pool_id);
    }

    std::string launch(const LaunchRequest& r) override {
        std::lock_guard lk(s_->m);
        const std::string& type = r.offer.instance_type;
        s_->log.push_back("launch " + type + (r.spot ? " spot" : " on-demand"));
        if (s_->refuse) s_->refuse();
        if (s_->broken_types.count(type)) throw std::runtime_error("InvalidParameter: " + type);
        if (s_->unknown_types.count(type))
            throw UnknownInstanceTypeError("InvalidInstanceType: no such type " + type);
        auto& cap = r.spot ? s_->spot_capacity : s_->capacity;
        if (auto it = cap.find(type); it != cap.end()) {
            if (it->second <= 0)
                throw CapacityError("InsufficientCapacity: no " + type + (r.spot ? " spot" : "") +
                                    " capacity");
            --it->second;
        }
        if (r.boot_script.find("SKY_HOST_KEY") == std::string::npos)
            throw std::runtime_error("the boot script carries no host key");
        const bool losing = s_->lose_after <= 0;
        if (!losing) --s_->lose_after;
        if (losing && s_->lose_launch_requests > 0) {
            --s_->lose_launch_requests;
            throw LaunchAnswerLostError("timed out waiting for the answer (nothing started)");
        }
        FakeCloudState::Machine mc;
        mc.info.id = "fake-" + std::to_string(++s_->next_id);
        mc.info.state = CloudInstance::State::pending;
        mc.info.spot = r.spot;
        mc.info.pool_id = r.pool_id;
        mc.info.instance_type = type;
        mc.info.public_ip = "203.0.113." + std::to_string(s_->next_id);
        mc.info.private_ip = "10.0.0." + std::to_string(s_->next_id);
        s_->machines[mc.info.id] = mc;
        if (losing && s_->lose_launch_answers > 0) {
            --s_->lose_launch_answers;
            s_->hidden[mc.info.id] = s_->lost_machine_hidden_lists;
            throw LaunchAnswerLostError("timed out waiting for the answer");
        }
        return mc.info.id;
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::lock_guard lk(s_->m);
        s_->log.push_back("describe");
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            auto it = s_->machines.find(id);
            if (it == s_->machines.end()) {
                CloudInstance u;
                u.id = id;
                u.state = CloudInstance::State::unknown;
                out.push_back(u);
                continue;
            }
            auto& mc = it->second;
            if (mc.info.state == CloudInstance::State::pending &&
                mc.describes_until_running-- <= 0) {
                mc.info.state = CloudInstance::State::running;
                mc.info.host_public_key = s_->reported_host_key;
            }
            if (mc.info.state == CloudInstance::State::stopping)
                mc.info.state = CloudInstance::State::gone;  // one describe to end
            out.push_back(mc.info);
        }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        std::lock_guard lk(s_->m);
        for (const auto& id : ids) {
            s_->log.push_back("terminate " + id);
            auto it = s_->machines.find(id);
            if (it != s_->machines.end() && it->second.info.state != CloudInstance::State::gone)
                it->second.info.state = CloudInstance::State::stopping;
        }
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        std::lock_guard lk(s_->m);
        s_->log.push_back("list " + std::string(pool_id));
        if (s_->refuse) s_->refuse();
        std::vector<CloudInstance> out;
        for (auto& [id, mc] : s_->machines) {
            if (auto h = s_->hidden.find(id); h != s_->hidden.end() && h->second > 0) {
                --h->second;  // eventually consistent: not listed yet
                continue;
            }
            if (mc.info.state != CloudInstance::State::gone &&
                (pool_id.empty() || mc.info.pool_id == pool_id))
                out.push_back(mc.info);
        }
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        std::lock_guard lk(s_->m);
        s_->log.push_back("delete_infra " + std::string(pool_id));
        if (s_->refuse) return;
        if (s_->infra_busy_deletes != 0) {
            if (s_->infra_busy_deletes > 0) --s_->infra_busy_deletes;
            return;  // DependencyViolation: still in use
        }
        s_->infra.erase(std::string(pool_id));
    }

    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        std::lock_guard lk(s_->m);
        if (s_->refuse) return {"firewall fw-" + std::string(pool_id) + ": cannot tell (refused)"};
        if (!s_->infra.count(std::string(pool_id))) return {};
        return {"firewall fw-" + std::string(pool_id) + ": in use"};
    }

    CloudLogin login() const override {
        CloudLogin l;
        std::lock_guard lk(s_->m);
        l.infra_wait = s_->infra_wait;
        l.lost_launch_wait = s_->lost_launch_wait;
        return l;
    }

private:
    std::shared_ptr<FakeCloudState> s_;
};

}  // namespace sky::test
