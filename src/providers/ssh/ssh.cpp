// sky::SSH: machines the user already has. Node i is hosts[i]; nothing is rented or returned,
// and the watchdog never powers a machine off.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "ledger/ledger.hpp"
#include "pool/backend.hpp"
#include "providers/remote/remote_node.hpp"
#include "providers/ssh/provider.hpp"
#include "util/env.hpp"

namespace sky::detail {

namespace {

class SshBackend final : public Backend {
public:
    SshBackend(const PoolSpec& spec, std::string pool_id, Ledger* ledger)
        : spec_(spec),
          cfg_(*spec.provider.get<SSH>()),
          pool_id_(std::move(pool_id)),
          ledger_(ledger) {}
    ~SshBackend() override { stop_all(); }

    std::string head_address() const override { return cfg_.hosts.at(0); }

    void provision(int nodes, const std::function<void(Event)>& emit) override {
        std::lock_guard lk(m_);
        nodes_.resize(static_cast<std::size_t>(nodes));
        emit(InstanceLaunching{nodes, "ssh", "ssh"});
    }

    void add(const std::vector<int>& nodes, const std::function<void(Event)>& emit) override {
        {
            std::lock_guard lk(m_);
            for (int i : nodes) {
                // Node i is hosts[i]: a pool grows within the hosts it was given.
                if (i < 0 || static_cast<std::size_t>(i) >= cfg_.hosts.size())
                    throw ConfigError(fmt::format(
                        "sky::SSH has {} host(s): node {} has none to run on (a pool on SSH "
                        "grows only within its hosts)",
                        cfg_.hosts.size(), i));
                if (nodes_.size() <= static_cast<std::size_t>(i))
                    nodes_.resize(static_cast<std::size_t>(i) + 1);
            }
        }
        emit(InstanceLaunching{static_cast<int>(nodes.size()), "ssh", "ssh"});
    }

    void release(int node) override {
        std::unique_ptr<RemoteNode> n;
        {
            std::lock_guard lk(m_);
            if (node < 0 || static_cast<std::size_t>(node) >= nodes_.size()) return;
            n = std::move(nodes_[static_cast<std::size_t>(node)]);
        }
        if (!n) return;
        // The machine stays (it is the user's); the pool's worker on it is stopped.
        n->stop();
        const std::string id = ledger_id(cfg_.hosts.at(static_cast<std::size_t>(node)));
        std::lock_guard lk(m_);
        // Two nodes may share a host: the record goes when the last of them does.
        if (auto it = std::find(recorded_.begin(), recorded_.end(), id); it != recorded_.end()) {
            recorded_.erase(it);
            if (ledger_ && std::find(recorded_.begin(), recorded_.end(), id) == recorded_.end())
                ledger_->instance_gone(id);
        }
    }

    NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        const std::string& host = cfg_.hosts.at(static_cast<std::size_t>(node));
        std::string id = fmt::format("ssh-{}-{}", node, host);
        RemoteNode* existing = nullptr;
        {
            std::lock_guard lk(m_);
            existing = nodes_.at(static_cast<std::size_t>(node)).get();
        }
        if (existing && existing->reachable()) {
            // A replacement: same machine, fresh worker. (Over the node's connection: when that
            // died unnoticed, e.g. a cut link, the replacement fails within the exec's bound and
            // the node is lost; a new connection to a cut-off host would hold up teardown.)
            existing->restart_worker(emit);
        } else {
            RemoteNodeSpec where;
            where.host = host;
            where.port = static_cast<std::uint16_t>(cfg_.port);
            where.user = cfg_.user;
            where.private_key_file =
                cfg_.identity_file.empty() ? home_path(".ssh/id_ed25519") : cfg_.identity_file;
            // Host keys are pinned: known_hosts decides, there is no trust on first use.
            where.host_key = ssh::HostKeyPin::known_hosts(
                cfg_.known_hosts.empty() ? home_path(".ssh/known_hosts") : cfg_.known_hosts);
            where.shipment = shipment();
            // In the ledger before anything runs there: the machine is the user's, the worker
            // sky starts on it is the pool's.
            if (ledger_) {
                ledger_->instance(ledger_id(host));
                std::lock_guard lk(m_);
                recorded_.push_back(ledger_id(host));
            }
            emit(InstanceProvisioned{id, node, false, "ssh", host, std::string("ssh"), 0.0,
                                     std::nullopt});
            std::unique_ptr<RemoteNode> n;
            try {
                n = RemoteNode::start(where, spec_, pool_id_, node, id, emit);
            } catch (const ssh::SshError& e) {
                // Unreachable, refused key, wrong host key: the public error, phase "connect".
                throw BootstrapError(node, id, "connect", e.what());
            }
            std::lock_guard lk(m_);
            nodes_.at(static_cast<std::size_t>(node)) = std::move(n);
            existing = nodes_.at(static_cast<std::size_t>(node)).get();
        }
        NodeStart s;
        s.instance.id = id;
        s.instance.node = node;
        s.instance.provider = "ssh";
        s.instance.instance_type = "ssh";
        s.instance.public_ip = host;
        s.instance.private_ip = host;
        s.token = existing->token();
        s.stream = existing->connect_worker();
        return s;
    }

    NodeExit exit_reason(int node) override {
        RemoteNode* n = nullptr;
        {
            std::lock_guard lk(m_);
            n = nodes_.at(static_cast<std::size_t>(node)).get();
        }
        if (!n) return {NodeLostError::Reason::unreachable, "the node was never started"};
        return n->exit_reason();
    }

    bool can_reconnect(int node) const override {
        std::lock_guard lk(m_);
        return nodes_.at(static_cast<std::size_t>(node)) != nullptr;
    }

    std::unique_ptr<io::Stream> reconnect(int node, std::chrono::milliseconds within) override {
        RemoteNode* n = nullptr;
        {
            std::lock_guard lk(m_);
            n = nodes_.at(static_cast<std::size_t>(node)).get();
        }
        if (!n) throw WorkerGone("the node was never started");
        return n->reconnect_worker(within);
    }

    bool can_restart(int node) const override {
        std::lock_guard lk(m_);
        auto& n = nodes_.at(static_cast<std::size_t>(node));
        return n && n->reachable();
    }

    void stop_all() noexcept override {
        if (stopped_.exchange(true)) return;  // once (backend.hpp)
        std::vector<std::unique_ptr<RemoteNode>> all;
        {
            std::lock_guard lk(m_);
            for (auto& n : nodes_) all.push_back(std::move(n));
        }
        // In parallel: each stop is a round trip or two over its own session.
        std::vector<std::thread> threads;
        for (auto& n : all)
            if (n) threads.emplace_back([p = n.get()] { p->stop(); });
        for (auto& t : threads) t.join();
        // The machines stay (they are the user's); the pool's workers on them are stopped, or
        // end by their idle timeout where a host did not answer.
        std::lock_guard lk(m_);
        if (ledger_)
            for (const auto& id : recorded_) ledger_->instance_gone(id);
        recorded_.clear();
    }

private:
    // "ssh:<user>@<host>:<port>": the node as the ledger (and `sky ls`) name it.
    std::string ledger_id(const std::string& host) const {
        return fmt::format("ssh:{}@{}:{}", cfg_.user, host, cfg_.port);
    }

    // One per pool: every node's start shares it, so a file leaves this client once.
    std::shared_ptr<ship::PoolShipment> shipment() {
        std::lock_guard lk(m_);
        if (!shipment_) shipment_ = std::make_shared<ship::PoolShipment>(ship::this_program());
        return shipment_;
    }

    PoolSpec spec_;
    std::shared_ptr<ship::PoolShipment> shipment_;
    SSH cfg_;
    std::string pool_id_;
    mutable std::mutex m_;
    std::atomic<bool> stopped_{false};  // stop_all() ran: it runs once
    std::vector<std::unique_ptr<RemoteNode>> nodes_;
    Ledger* ledger_ = nullptr;           // the pool's write-ahead ledger (may be null)
    std::vector<std::string> recorded_;  // in the ledger and not yet recorded gone
};

}  // namespace

ProviderDescriptor ssh_provider() {
    ProviderDescriptor d({
        .exposure =
            [](const PoolSpec& spec) {
                const SSH* ssh = spec.provider.get<SSH>();
                return Exposure::open_to_others(fmt::format(
                    "this distributed call runs on your hosts {}, where sky opens and closes no "
                    "port: {}: every other user of those hosts, and anyone who can reach them on "
                    "their network, can (docs/distributed.md)",
                    ssh ? fmt::format("{}", fmt::join(ssh->hosts, ", ")) : std::string(),
                    rendezvous_services));
            },
        .billing = BillingPolicy{},  // the user's own machines: their hourly rate is 0
        .runs_on_this_machine = false,
    });
    d.validate = [](const PoolSpec& spec, std::vector<std::string>& problems) {
        const SSH* ssh = spec.provider.get<SSH>();
        if (!ssh) return;
        if (ssh->hosts.empty()) problems.push_back("provider: sky::SSH needs at least one host");
        if (static_cast<std::size_t>(spec.nodes) > ssh->hosts.size())
            problems.push_back(fmt::format("nodes ({}) is more than sky::SSH has hosts ({})",
                                           spec.nodes, ssh->hosts.size()));
        // A host is "launched" by starting its worker: an elastic pool grows within its hosts.
        if (static_cast<std::size_t>(spec.autoscale.max) > ssh->hosts.size())
            problems.push_back(
                fmt::format("autoscale.max ({}) is more than sky::SSH has hosts ({})",
                            spec.autoscale.max, ssh->hosts.size()));
        if (ssh->port < 1 || ssh->port > 65535)
            problems.push_back(
                fmt::format("provider: sky::SSH port must be in [1, 65535], got {}", ssh->port));
        if (ssh->user.empty()) problems.push_back("provider: sky::SSH user is empty");
    };
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return std::make_unique<SshBackend>(c.spec, c.pool_id, c.ledger);
    };
    // Nothing to terminate: the machines are the user's (their workers end by their idle
    // timeout). The ledger is closed.
    d.collect = [](std::vector<GcPool> pools, const GcOptions& o) {
        for (const auto& p : pools) {
            if (!p.record) continue;
            std::string hosts;
            for (const auto& h : p.machines) hosts += (hosts.empty() ? "" : ", ") + h;
            o.say(fmt::format(
                "{}: nothing to terminate: {} are your machines (its workers there end by their "
                "idle timeout){}",
                p.label, hosts.empty() ? std::string("its hosts") : hosts,
                o.dry_run ? "; would close its ledger" : "; ledger closed"));
            if (o.dry_run) continue;
            try {
                Ledger::record_collected(*p.record, p.machines);
            } catch (const std::exception& e) {
                o.fail(fmt::format("pool {}: cannot update its ledger: {}", p.pool_id, e.what()));
            }
        }
    };
    return d;
}

}  // namespace sky::detail
