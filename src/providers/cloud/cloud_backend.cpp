// CloudBackend: a pool's machines on any cloud, through its adapter. The invariants that keep
// instances from leaking live here once: every id the adapter returns is recorded (and written
// to the ledger) before anything else happens to it; an offer that fails terminates what it
// started; stop_all() terminates the union of what was launched and what carries the pool's tag,
// and confirms each is gone.
#include "providers/cloud/cloud_backend.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "ledger/ledger.hpp"
#include "node/scripts.hpp"
#include "providers/cloud/node_keys.hpp"
#include "providers/cloud/offers.hpp"
#include "providers/cloud/provider.hpp"
#include "providers/cloud/refusal.hpp"
#include "providers/cloud/scripts.hpp"
#include "providers/cloud/sweep.hpp"
#include "providers/remote/remote_node.hpp"
#include "sky/catalog.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using Clock = std::chrono::steady_clock;
using State = CloudInstance::State;

const char* state_name(State s) {
    switch (s) {
        case State::pending:
            return "pending";
        case State::running:
            return "running";
        case State::stopping:
            return "stopping";
        case State::gone:
            return "gone";
        case State::unknown:
            return "unknown";
    }
    return "?";
}

struct CloudNode {
    std::string instance_id;
    Offer offer;
    bool spot = false;
    std::string public_ip, private_ip;
    int ssh_port = 22;
    std::string host_public_key;         // the pinned host key, "ssh-ed25519 AAAA..."
    bool host_key_rotated = false;       // the boot-script key was replaced (or that was tried)
    std::unique_ptr<NodeHandle> remote;  // the started node (over SSH, or simulated)
    bool gone = false;  // the cloud ended it, or it is being reclaimed: never reused
    // No machine: added to a running pool and not launched yet, or released (an elastic
    // pool's node that left). connect() launches one like a replacement.
    bool absent = false;
};

class CloudBackend final : public Backend {
public:
    CloudBackend(std::unique_ptr<CloudAdapter> api, const BackendContext& c, NodeStarter starter)
        : api_(std::move(api)),
          starter_(std::move(starter)),
          spec_(c.spec),
          pool_id_(c.pool_id),
          ledger_(c.ledger),
          provider_(api_->name()),
          login_(api_->login()),
          timings_(api_->timings()) {
        name_ = "sky-" + pool_id_;
        region_ = api_->region();
        // `sky gc` asks this region about ids the cloud no longer knows.
        if (ledger_ && !region_.empty()) ledger_->region(region_);
    }
    ~CloudBackend() override { stop_all(); }

    std::string head_address() const override {
        std::lock_guard lk(m_);
        if (nodes_.empty()) return "127.0.0.1";
        return nodes_[0].private_ip.empty() ? nodes_[0].public_ip : nodes_[0].private_ip;
    }

    void provision(int nodes, const std::function<void(Event)>& emit) override {
        SelectionRequest req{
            .accelerator = spec_.accelerator,
            .cpu = spec_.cpu,
            .memory = spec_.memory,
            .region = region_.empty() ? std::nullopt : std::optional<std::string>(region_),
            .spot = spec_.spot,
            .machine = spec_.machine};
        std::vector<Offer> live;
        try {
            live = api_->live_offers(Catalog::embedded(), req, emit);
        } catch (const CapacityError& e) {
            // The cloud answered: nothing can be had now. No catalog row is tried in its place.
            throw ProvisionError(
                fmt::format("{}: nothing is available now: {}", provider_, e.what()));
        } catch (const CredentialsRefused&) {
            credentials_refused_ = true;
            throw;
        } catch (const Error&) {
            throw;
        } catch (const std::exception& e) {
            throw ProvisionError(fmt::format("{}: reading offers failed: {}", provider_, e.what()));
        }
        const bool answered = !live.empty();
        const Catalog catalog = pool_offers(Catalog::embedded(), std::move(live), provider_);
        offers_ = catalog.select(req, provider_);
        if (offers_.empty())
            throw ProvisionError(fmt::format("{}: no instance type {}matches: {}", provider_,
                                             answered ? "the cloud offers now " : "",
                                             explain_no_match(catalog.offers(), req)));
        emit(InfraCreating{});
        create_infra(emit);
        emit(InfraCreated{region_});  // empty: each offer names its own region

        // A lazy start (an elastic pool's nodes = 0): the offers and the infrastructure are
        // checked and made, no machine is launched.
        std::vector<CloudNode> started;
        if (nodes > 0) {
            std::vector<int> all(static_cast<std::size_t>(nodes));
            for (int i = 0; i < nodes; ++i) all[static_cast<std::size_t>(i)] = i;
            started = launch(all, spot_node_count(spec_.spot, nodes), "", emit);
        }
        std::lock_guard lk(m_);
        nodes_.assign(std::make_move_iterator(started.begin()),
                      std::make_move_iterator(started.end()));
    }

    // A node joins a running pool: it gets its machine in connect(), launched like a
    // replacement (the offers, the spot strategy, the capacity walk), each node on its own.
    // A deque: a node's element stays where it is while others are added (connect() and the
    // others use it outside the lock).
    void add(const std::vector<int>& which, const std::function<void(Event)>& emit) override {
        (void)emit;
        std::lock_guard lk(m_);
        if (stopping_) throw ProvisionError(provider_ + ": the pool is closing");
        for (int i : which) {
            if (i < 0) throw ConfigError(fmt::format("{}: no node {}", provider_, i));
            while (nodes_.size() <= static_cast<std::size_t>(i)) {
                nodes_.emplace_back();
                nodes_.back().gone = true;
                nodes_.back().absent = true;
            }
            auto& n = nodes_[static_cast<std::size_t>(i)];
            if (!n.absent)
                throw Error(fmt::format("{}: node {} is still in the pool", provider_, i));
            n = CloudNode{};
            n.absent = true;
            n.gone = true;
            // Spot for a joining node when the strategy would put a pool of one on spot.
            n.spot = spot_node_count(spec_.spot, 1) > 0;
        }
    }

    // The node's worker is stopped and its machine terminated and confirmed gone (the
    // ledger's record with it); its index is free again.
    void release(int node) override {
        std::unique_ptr<NodeHandle> remote;
        std::string id;
        {
            std::lock_guard lk(m_);
            if (node < 0 || static_cast<std::size_t>(node) >= nodes_.size()) return;
            auto& n = nodes_[static_cast<std::size_t>(node)];
            remote = std::move(n.remote);
            id = n.instance_id;
        }
        if (remote) remote->stop();
        remote.reset();
        if (!id.empty()) terminate({id});
        std::vector<std::string> left;  // its addresses, for the others' host firewalls
        {
            std::lock_guard lk(m_);
            auto& n = nodes_[static_cast<std::size_t>(node)];
            for (const std::string* a : {&n.public_ip, &n.private_ip})
                if (!a->empty()) left.push_back(*a);
            n = CloudNode{};
            n.gone = true;
            n.absent = true;
        }
        if (login_.host_firewall)
            forget_left(node, left, [this](Event e) {
                // release() has no event sink: the pool's log says it.
                if (const auto* x = std::get_if<ErrorEvent>(&e)) try {
                        spdlog::warn("sky: pool {}: {}", pool_id_, x->message);
                    } catch (...) {
                    }
            });
    }

    double node_price() const override {
        std::lock_guard lk(m_);
        if (offers_.empty()) return 0;
        return offers_.front().hourly_price(spot_node_count(spec_.spot, 1) > 0 &&
                                            offers_.front().spot_available);
    }

    NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        CloudNode* n = nullptr;
        bool replace = false;
        {
            std::lock_guard lk(m_);
            n = &nodes_.at(static_cast<std::size_t>(node));
            replace = n->gone || (n->remote && !n->remote->reachable());
        }
        if (replace) {
            std::vector<std::string> left;  // the replaced machine's addresses
            {
                std::lock_guard lk(m_);
                for (const std::string* a : {&n->public_ip, &n->private_ip})
                    if (!a->empty()) left.push_back(*a);
            }
            replace_node(node, *n, emit);  // a joining node's first machine too
            if (login_.host_firewall) admit_joined(node, *n, left, emit);
        } else if (n->remote) {
            n->remote->restart_worker(emit);  // a fresh worker on the same machine
        }
        if (!n->remote) {
            try {
                start_remote(node, *n, emit);
            } catch (const ssh::SshError& e) {
                // Unreachable, refused key, wrong host key: the public error, phase "connect".
                throw BootstrapError(node, n->instance_id, "connect", e.what());
            }
        }
        NodeStart s;
        s.instance = instance_of(node, *n);
        s.token = n->remote->token();
        s.stream = n->remote->connect_worker();
        return s;
    }

    NodeExit exit_reason(int node) override {
        CloudNode* n = nullptr;
        {
            std::lock_guard lk(m_);
            n = &nodes_.at(static_cast<std::size_t>(node));
        }
        // The cloud knows first: a reclaim shows in the machine's state.
        if (auto ex = cloud_says_gone(*n)) return std::move(*ex);
        if (!n->remote) return {NodeLostError::Reason::unreachable, "the node was never started"};
        NodeExit ex = n->remote->exit_reason();
        // The node's watchdog saw the reclaim notice: the machine is going; never restart a
        // worker on it.
        if (ex.reason == NodeLostError::Reason::preempted) mark_gone(*n);
        return ex;
    }

    bool can_reconnect(int node) const override {
        std::lock_guard lk(m_);
        const auto& n = nodes_.at(static_cast<std::size_t>(node));
        return n.remote && !n.gone && n.remote->can_reconnect();
    }

    std::unique_ptr<io::Stream> reconnect(int node, std::chrono::milliseconds within) override {
        NodeHandle* remote = nullptr;
        CloudNode* n = nullptr;
        {
            std::lock_guard lk(m_);
            n = &nodes_.at(static_cast<std::size_t>(node));
            if (!n->gone) remote = n->remote.get();
        }
        if (!remote) throw WorkerGone("the node's machine is gone");
        // A reclaimed or terminated machine is not waited for: it is lost (and replaced) now.
        if (auto ex = cloud_says_gone(*n)) throw WorkerGone(ex->detail);
        return remote->reconnect_worker(within);
    }

    bool can_restart(int node) const override {
        std::lock_guard lk(m_);
        (void)nodes_.at(static_cast<std::size_t>(node));
        // A live machine gets a fresh worker; a gone or unreachable one a new machine.
        return !stopping_;
    }

    void begin_stop() noexcept override {
        std::lock_guard lk(m_);
        stopping_ = true;
    }

    void stop_all() noexcept override {
        // Once: the pool's close() runs it, and the destructor's call (a backend destroyed
        // without one) must not ask the cloud again from whichever thread drops the pool last,
        // after the pool's owner has moved on.
        if (stopped_.exchange(true)) return;
        try {
            std::vector<std::unique_ptr<NodeHandle>> remotes;
            std::vector<std::string> ids;
            {
                std::lock_guard lk(m_);
                stopping_ = true;
                for (auto& n : nodes_) {
                    if (n.remote) remotes.push_back(std::move(n.remote));
                    if (!n.instance_id.empty()) ids.push_back(n.instance_id);
                }
                for (auto& id : launched_)
                    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
            }
            std::vector<std::thread> threads;
            for (auto& r : remotes) threads.emplace_back([p = r.get()] { p->stop(); });
            for (auto& t : threads) t.join();
            remotes.clear();
            // Also whatever carries this pool's tag: a machine whose launch answer was lost (a
            // timeout after the cloud had started it) is known only by its tag.
            // Asked again after a failed answer (it hides nothing for good), but not after
            // refused credentials: then the cloud started nothing and would refuse again.
            for (int tries = 0; tries < (credentials_refused_.load() ? 1 : 3); ++tries) {
                try {
                    for (const auto& i : api_->list(pool_id_))
                        if (std::find(ids.begin(), ids.end(), i.id) == ids.end())
                            ids.push_back(i.id);
                    break;
                } catch (...) {
                }
            }
            terminate(ids);
            {
                std::lock_guard lk(m_);
                std::erase_if(launched_,
                              [&](const std::string& id) { return terminated_.count(id) > 0; });
            }
            delete_infra();
        } catch (...) {
            // Never throws: what is left carries the pool's tag and is in the ledger, for
            // `sky ls` and `sky gc`.
        }
    }

    std::vector<std::string> leftovers() const override {
        std::lock_guard lk(m_);
        std::vector<std::string> left;
        for (const auto& id : launched_)
            if (!terminated_.count(id))
                left.push_back(
                    fmt::format("{} instance {} (tag sky:pool={})", provider_, id, pool_id_));
        return left;
    }

private:
    // Whether the cloud says node n's machine ended (a reclaim, a termination): why, or nothing
    // when it runs or the cloud could not say.
    std::optional<NodeExit> cloud_says_gone(CloudNode& n) {
        try {
            for (const CloudInstance& i : api_->describe({n.instance_id})) {
                if (i.id != n.instance_id) continue;
                // Preemption is a spot machine's fate (InstancePreempted, api.md §8); a machine
                // bought on demand that the cloud takes back is lost like any other.
                if (i.preempted && n.spot) {
                    mark_gone(n);
                    return NodeExit{
                        NodeLostError::Reason::preempted,
                        fmt::format("{} reclaimed the spot instance {}", provider_, n.instance_id)};
                }
                if (i.preempted) {
                    mark_gone(n);
                    return NodeExit{
                        NodeLostError::Reason::unreachable,
                        fmt::format("{} took back instance {} ({})", provider_, n.instance_id,
                                    i.reason.empty() ? "no reason given" : i.reason)};
                }
                if (i.state == State::stopping || i.state == State::gone ||
                    i.state == State::unknown) {
                    mark_gone(n);
                    return NodeExit{
                        NodeLostError::Reason::unreachable,
                        fmt::format("instance {} is {} ({})", n.instance_id, state_name(i.state),
                                    i.reason.empty() ? "no reason given" : i.reason)};
                }
            }
        } catch (const std::exception&) {
            // Unknown: what SSH sees decides.
        }
        return std::nullopt;
    }

    void mark_gone(CloudNode& n) {
        std::lock_guard lk(m_);
        n.gone = true;
    }

    Instance instance_of(int node, const CloudNode& n) const {
        Instance i;
        i.id = n.instance_id;
        i.node = node;
        i.provider = provider_;
        i.instance_type = n.offer.instance_type;
        i.public_ip = n.public_ip;
        i.private_ip = n.private_ip.empty() ? n.public_ip : n.private_ip;
        i.spot = n.spot;
        i.hourly_price = n.offer.hourly_price(n.spot);
        i.on_demand_price = n.offer.on_demand_price;
        return i;
    }

    // The pool's client key and what the cloud needs before any launch.
    void create_infra(const std::function<void(Event)>& emit) {
        std::lock_guard lk(infra_m_);
        if (dir_.empty()) {
            std::string tmpl = (std::filesystem::temp_directory_path() /
                                fmt::format("sky-{}-{}-XXXXXX", provider_, pool_id_))
                                   .string();
            if (!::mkdtemp(tmpl.data()))
                throw ProvisionError(provider_ + ": cannot create a key directory");
            dir_ = tmpl;
            ssh_keygen(dir_ / "key", name_);
            public_key_ = public_key_of(dir_ / "key");
        }
        infra_created_ = true;  // delete_infra() runs whatever create_infra managed
        // Three tries, 0.5 s and 1 s apart: a create refused by a flaky API (a 5xx after the
        // HTTP client's own retries, an answer lost and its thing not found) is asked again, as
        // the adapter contract allows (a second call after a partial failure finds what the
        // first made). Refused credentials are not asked again: the answer would be the same.
        for (int attempt = 1;; ++attempt) {
            try {
                api_->create_infra({pool_id_, name_, public_key_}, emit);
                return;
            } catch (const ConfigError&) {
                throw;
            } catch (const CredentialsRefused&) {
                credentials_refused_ = true;
                throw;
            } catch (const std::exception& e) {
                if (attempt >= 3 || stopping()) {
                    if (dynamic_cast<const ProvisionError*>(&e)) throw;
                    throw ProvisionError(fmt::format("{}: {}", provider_, e.what()));
                }
            }
            for (int i = 0; i < 5 * attempt && !stopping(); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }

    // The pool's infrastructure, retried while the cloud still says it is in use; what is left
    // goes into the ledger (`sky ls` shows it, `sky gc` deletes it later).
    void delete_infra() noexcept {
        std::lock_guard lk(infra_m_);
        if (infra_created_) {
            // With no launch ever sent, no machine can hold the firewall: what is left is there
            // because a request failed (credentials the cloud refuses, a flaky API), and waiting
            // the minutes a machine's network interface may take to let go would only hold up
            // the error. A few quick rounds; what is still left goes to the ledger.
            // Credentials the cloud refused before any launch: every round would be refused
            // the same way, so one round, and what is left goes to the ledger at once.
            const bool machines = launch_sent_.load();
            const std::chrono::milliseconds wait =
                machines                      ? std::chrono::milliseconds(timings_.infra_wait)
                : credentials_refused_.load() ? std::chrono::milliseconds(0)
                                              : std::min<std::chrono::milliseconds>(
                                                    timings_.infra_wait, std::chrono::seconds(10));
            const std::vector<std::string> left = delete_infra_until_gone(
                *api_, pool_id_, wait,
                machines ? std::chrono::seconds(5) : std::chrono::seconds(1));
            infra_created_ = false;
            if (!left.empty()) {
                if (ledger_) ledger_->infra_left(left);
                try {
                    spdlog::warn(
                        "sky: pool {}: still there after {} s: {}; `sky ls` shows it and `sky gc` "
                        "deletes it",
                        pool_id_, std::chrono::duration_cast<std::chrono::seconds>(wait).count(),
                        fmt::join(left, "; "));
                } catch (...) {
                }
            }
        }
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
            dir_.clear();
        }
    }

    // Machines for `which` (node indices), the first `want_spot` of them on spot: rounds over
    // the offers, cheapest first, moving on after a capacity error. Everything an offer started
    // is terminated before the next is tried. Throws ProvisionError with every attempt.
    std::vector<CloudNode> launch(const std::vector<int>& which, int want_spot,
                                  const std::string& tag, const std::function<void(Event)>& emit) {
        const bool fallback = on_demand_fallback(spec_.spot);
        int rounds = 1;
        std::chrono::seconds round_pause{0};
        if (auto* a = std::get_if<Spot::Always>(&spec_.spot.strategy)) {
            rounds = 1 + std::clamp(a->retries, 0, 100);
            round_pause = a->interval;
        }
        const int count = static_cast<int>(which.size());
        std::vector<ProvisionAttempt> attempts;
        for (int round = 0; round < rounds; ++round) {
            if (round > 0) {
                auto until = Clock::now() + std::min(round_pause, std::chrono::seconds(60));
                while (Clock::now() < until) {
                    if (stopping()) throw ProvisionError(provider_ + ": the pool is closing");
                    std::this_thread::sleep_for(std::min<Clock::duration>(
                        until - Clock::now(), std::chrono::milliseconds(100)));
                }
            }
            for (std::size_t o = 0; o < offers_.size(); ++o) {
                const Offer& offer = offers_[o];
                emit(InstanceLaunching{count, offer.instance_type, provider_});
                std::vector<CloudNode> started;
                if (try_offer(offer, which, want_spot, fallback,
                              fmt::format("{}{}-{}-{}", name_, tag, round, o), attempts, started,
                              emit)) {
                    end_strays(emit);
                    return started;
                }
            }
        }
        // ProvisionError lists the attempts itself, once.
        throw ProvisionError(
            fmt::format("{}: could not launch {} node(s); every offer failed:", provider_, count),
            std::move(attempts));
    }

    // One offer for every node in `which`, one launch per node (each node has its own host
    // key). On failure everything this offer started is terminated; returns false to move on
    // to the next offer, throws ProvisionError when the failure is not about capacity.
    bool try_offer(const Offer& offer, const std::vector<int>& which, int want_spot, bool fallback,
                   const std::string& token_base, std::vector<ProvisionAttempt>& attempts,
                   std::vector<CloudNode>& started, const std::function<void(Event)>& emit) {
        const std::string where = offer.region.empty() ? region_ : offer.region;
        auto record = [&](bool spot, const std::string& err) {
            const ProvisionAttempt a{provider_, offer.instance_type, where, spot, err};
            // Several nodes refused alike are one attempt.
            if (attempts.empty() || attempts.back().instance_type != a.instance_type ||
                attempts.back().region != a.region || attempts.back().spot != a.spot ||
                attempts.back().error != a.error)
                attempts.push_back(a);
        };
        auto give_up = [&](bool spot, const std::string& err) {
            record(spot, err);
            std::vector<std::string> ids;
            for (auto& n : started) ids.push_back(n.instance_id);
            terminate(ids);
            started.clear();
        };
        bool spot_refused = false;  // this offer had no spot capacity: the rest go on demand
        for (std::size_t k = 0; k < which.size(); ++k) {
            const int node = which[k];
            if (stopping()) {
                give_up(false, "the pool is closing");
                throw ProvisionError(provider_ + ": the pool is closing", attempts);
            }
            const bool wants_spot = static_cast<int>(k) < want_spot;
            bool spot = wants_spot && offer.spot_available && !spot_refused;
            if (wants_spot && !offer.spot_available && !fallback) {
                give_up(true, "no spot market for this instance type");
                return false;
            }
            SshKeyPair host_key;
            {
                std::lock_guard lk(infra_m_);
                host_key = make_host_key(dir_, fmt::format("host{}", node));
            }
            LaunchRequest r;
            r.pool_id = pool_id_;
            r.name = name_;
            r.node = node;
            r.offer = offer;
            r.ssh_public_key = public_key_;
            r.boot_script = boot_script({.pool_id = pool_id_,
                                         .host_key = host_key,
                                         .hard_timeout = spec_.timeout,
                                         .power_off = login_.power_off_on_expiry});
            std::string id;
            bool sent_again = false;  // a lost launch that started nothing is sent once more
            // One launch (its lookup, until its id is recorded) at a time in the pool: a machine
            // with the pool's tag that the pool does not know is then the lost launch's.
            std::unique_lock launching(launch_m_);
            for (int tries = 0; tries < (sent_again ? 3 : 2) && id.empty(); ++tries) {
                r.spot = spot;
                r.client_token =
                    fmt::format("{}-{}{}", token_base, node, spot ? "s" : "d").substr(0, 64);
                try {
                    launch_sent_ = true;
                    id = api_->launch(r);
                } catch (const LaunchAnswerLostError& e) {
                    id = find_lost_launch();
                    if (id.empty()) {
                        const std::string why = fmt::format(
                            "{} (no machine of the pool's that it does not know appeared within "
                            "{} s{})",
                            e.what(), timings_.lost_launch_wait.count(),
                            sent_again ? "; teardown looks again" : "; sent again");
                        ++lost_unfound_;  // end_strays() looks once the nodes run
                        if (!sent_again) {
                            // Nothing started (or a machine that shows this late, which
                            // end_strays() or teardown's sweep ends): the node's one more try.
                            record(spot, why);
                            sent_again = true;
                            continue;
                        }
                        give_up(spot, why);
                        return false;
                    }
                    emit(ErrorEvent{
                        fmt::format("{}: a launch's answer was lost ({}); its machine {} was "
                                    "found by the pool's tag and is used",
                                    provider_, e.what(), id),
                        std::nullopt});
                } catch (const UnknownInstanceTypeError& e) {
                    // Not sold here at all: neither spot nor on demand; the next offer.
                    give_up(spot, e.what());
                    return false;
                } catch (const CapacityError& e) {
                    if (spot && fallback) {
                        // IfAvailable and Percent: this node goes on-demand on the same offer.
                        record(true, e.what());
                        spot = false;
                        spot_refused = true;
                        continue;
                    }
                    give_up(spot, e.what());
                    return false;
                } catch (const std::exception& e) {
                    give_up(spot, e.what());
                    throw ProvisionError(
                        fmt::format("{}: launching {} failed with an error that is not about "
                                    "capacity; provisioning stopped:",
                                    provider_, offer.instance_type),
                        attempts);
                }
            }
            if (id.empty()) {
                give_up(spot, "no instance started");
                return false;
            }
            record_launched(id);
            launching.unlock();
            CloudNode n;
            n.instance_id = id;
            n.offer = offer;
            n.spot = spot;
            n.host_public_key = host_key.public_key;
            started.push_back(std::move(n));
        }
        std::string err;
        if (!wait_running(started, err)) {
            give_up(want_spot > 0, err);
            return false;
        }
        for (std::size_t k = 0; k < started.size(); ++k) {
            const CloudNode& n = started[k];
            std::optional<double> spot_price;
            if (n.spot) spot_price = n.offer.hourly_price(true);
            emit(InstanceProvisioned{n.instance_id, which[k], n.spot, provider_, n.public_ip,
                                     n.offer.instance_type, n.offer.on_demand_price, spot_price});
        }
        return true;
    }

    // A lost launch whose machine showed only after its lookup gave up (the node was launched
    // again, or on another offer) is a stray: ended once the pool's nodes run, not billed until
    // teardown. What this list misses, teardown's sweep by tag finds.
    void end_strays(const std::function<void(Event)>& emit) {
        std::vector<std::string> strays;
        {
            std::lock_guard launching(launch_m_);
            if (lost_unfound_ == 0) return;
            try {
                strays = unknown_machines();
            } catch (...) {
                return;
            }
            lost_unfound_ = 0;
            for (const auto& id : strays) record_launched(id);  // in the ledger until gone
        }
        if (strays.empty()) return;
        emit(ErrorEvent{fmt::format("{}: {} started by a launch whose answer was lost, found late; "
                                    "terminated",
                                    provider_, fmt::join(strays, ", ")),
                        std::nullopt});
        terminate(strays);
    }

    // A launch whose answer was lost may have started a machine: it carries the pool's tag,
    // and (launch_m_ held: one launch at a time) it is the only live one the pool does not
    // know. Asked for a while, an eventually consistent list may show it late. "" when none.
    std::string find_lost_launch() {
        const auto until = Clock::now() + timings_.lost_launch_wait;
        auto pause = std::chrono::milliseconds(500);
        for (int round = 0; round < 32; ++round) {
            try {
                if (auto unknown = unknown_machines(); !unknown.empty()) return unknown.front();
            } catch (...) {  // a failed list hides nothing for good: asked again
            }
            if (Clock::now() >= until) break;
            const auto next = std::min(Clock::now() + pause, until);  // the last look at `until`
            while (Clock::now() < next) {
                if (stopping()) return {};
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            pause = std::min(pause * 2, std::chrono::milliseconds(8000));
        }
        return {};
    }

    // The live machines with the pool's tag that it neither launched nor saw end (one list();
    // throws what it throws).
    std::vector<std::string> unknown_machines() {
        std::vector<std::string> out;
        for (const CloudInstance& i : api_->list(pool_id_)) {
            if (i.id.empty() || i.state == State::gone || i.state == State::stopping) continue;
            std::lock_guard lk(m_);
            if (!terminated_.count(i.id) &&
                std::find(launched_.begin(), launched_.end(), i.id) == launched_.end())
                out.push_back(i.id);
        }
        return out;
    }

    void record_launched(const std::string& id) {
        {
            std::lock_guard lk(m_);
            launched_.push_back(id);
        }
        if (ledger_) ledger_->instance(id);
    }

    // Bounded polling until every machine runs with an address. An id the cloud does not know
    // yet is pending for a minute (eventually consistent APIs).
    bool wait_running(std::vector<CloudNode>& ns, std::string& err) {
        const auto start = Clock::now();
        const auto until = start + std::chrono::minutes(10);
        auto pause = std::chrono::milliseconds(200);
        std::vector<std::string> ids;
        for (auto& n : ns) ids.push_back(n.instance_id);
        int failed_describes = 0;
        for (int poll = 0; poll < 300 && Clock::now() < until; ++poll) {
            if (stopping()) {
                err = "the pool is closing";
                return false;
            }
            std::vector<CloudInstance> seen;
            try {
                seen = api_->describe(ids);
                failed_describes = 0;
            } catch (const std::exception& e) {
                // One unreadable answer does not end an offer whose machines are starting; three
                // in a row do.
                if (++failed_describes >= 3) {
                    err = fmt::format("describing {}: {}", fmt::join(ids, ", "), e.what());
                    return false;
                }
                std::this_thread::sleep_for(pause);
                continue;
            }
            std::size_t ready = 0;
            for (const auto& i : seen) {
                auto it = std::find_if(ns.begin(), ns.end(),
                                       [&](const CloudNode& n) { return n.instance_id == i.id; });
                if (it == ns.end()) continue;
                if (i.state == State::unknown && Clock::now() - start < std::chrono::minutes(1))
                    continue;
                if (i.state == State::stopping || i.state == State::gone ||
                    i.state == State::unknown) {
                    err = fmt::format("instance {} ended while starting: {}", i.id,
                                      i.reason.empty() ? state_name(i.state) : i.reason);
                    return false;
                }
                if (i.ssh_port < 1 || i.ssh_port > 65535) {
                    // An adapter's number, never truncated into some other port.
                    err = fmt::format("instance {} reports SSH port {}, which is no TCP port", i.id,
                                      i.ssh_port);
                    return false;
                }
                it->public_ip = i.public_ip;
                it->private_ip = i.private_ip;
                it->ssh_port = i.ssh_port;
                // A key the cloud vouches for replaces the boot script's (which may never run).
                if (!i.host_public_key.empty()) it->host_public_key = i.host_public_key;
                if (i.state == State::running && !i.public_ip.empty()) ++ready;
            }
            if (ready == ns.size()) return true;
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(5000));
        }
        err = "instances not running with an address within 10 minutes";
        return false;
    }

    // Terminates, then describes until every id is gone (bounded). Never throws. One failed
    // call (an expired token, an unreadable answer) must not leave a machine running: the sweep
    // asks again, a bounded number of times. What is still left then carries the pool's tag and
    // is in the ledger (`sky gc`), and its watchdog or the boot script's timer powers it off.
    void terminate(std::vector<std::string> ids) noexcept {
        {
            // Confirmed earlier: a second stop_all() costs no call.
            std::lock_guard lk(m_);
            std::erase_if(ids, [&](const std::string& id) { return terminated_.count(id) > 0; });
        }
        if (ids.empty()) return;
        SweepOptions o;
        o.on_gone = [&](const std::string& id) {
            {
                std::lock_guard lk(m_);
                terminated_.insert(id);
            }
            if (ledger_) ledger_->instance_gone(id);
        };
        (void)terminate_and_confirm(*api_, std::move(ids), o);
    }

    // A lost node gets a new machine: the old one is terminated (it is gone, being reclaimed,
    // or unreachable), a new one is launched from the same offers and takes its place.
    // A joining node (absent: no machine yet) is launched the same way.
    void replace_node(int node, CloudNode& n, const std::function<void(Event)>& emit) {
        std::unique_ptr<NodeHandle> old_remote;
        std::string old_id;
        bool was_spot = false;
        bool joining = false;
        int k = 0;
        {
            std::lock_guard lk(m_);
            old_remote = std::move(n.remote);
            old_id = n.instance_id;
            was_spot = n.spot;
            joining = n.absent;
            k = ++replacements_;
        }
        if (old_remote) old_remote->stop();
        old_remote.reset();
        if (!old_id.empty()) terminate({old_id});
        std::vector<CloudNode> fresh =
            launch({node}, was_spot ? 1 : 0, fmt::format("-{}{}", joining ? "a" : "r", k), emit);
        std::lock_guard lk(m_);
        n = std::move(fresh.at(0));
    }

    // Bootstrap over SSH, pinning the node's host key: a fresh machine may still present its
    // image's key until its boot script has run, so a mismatch is retried for a while, never
    // accepted.
    void start_remote(int node, CloudNode& n, const std::function<void(Event)>& emit) {
        if (starter_) {
            NodeStartRequest r;
            r.node = node;
            r.machine.id = n.instance_id;
            r.machine.state = State::running;
            r.machine.public_ip = n.public_ip;
            r.machine.private_ip = n.private_ip;
            r.machine.ssh_port = n.ssh_port;
            r.machine.spot = n.spot;
            r.machine.instance_type = n.offer.instance_type;
            r.machine.pool_id = pool_id_;
            r.machine.host_public_key = n.host_public_key;  // the key the pool pins
            r.offer = n.offer;
            r.spec = &spec_;
            r.pool_id = pool_id_;
            auto started = starter_(r, emit);
            std::lock_guard lk(m_);
            n.remote = std::move(started);
            return;
        }
        RemoteNodeSpec where;
        where.host = n.public_ip;
        where.port = static_cast<std::uint16_t>(n.ssh_port);
        where.user = login_.user;
        where.private_key_file = dir_ / "key";
        where.power_off_on_expiry = login_.power_off_on_expiry;
        if (n.spot) where.preemption_probe = login_.preemption_probe;
        where.connect_attempts = 10;
        // The pool's nodes share one shipment: each file leaves the client once, the others
        // copy it from a node that has it over their private addresses.
        where.shipment = shipment();
        where.peer_address = n.private_ip.empty() ? n.public_ip : n.private_ip;
        // Only a private address is the node's own on the pool's network: a public one (Verda)
        // carries the transfer token across the internet, a container's (RunPod, Vast.ai) is
        // its host's, shared with other tenants.
        where.peer_transfers = !n.private_ip.empty();
        where.host_firewall = login_.host_firewall;
        if (login_.host_firewall) where.pool_addresses = pool_addresses();
        const auto boot_wait = std::max(login_.boot_wait, std::chrono::seconds(1));
        auto until = Clock::now() + boot_wait;
        std::unique_ptr<RemoteNode> remote;
        for (int attempt = 0;; ++attempt) {
            try {
                // The boot-script key is single-use: once it has authenticated the node, the
                // node makes a new one and the pool pins that instead.
                if (login_.rotate_host_key && !n.host_key_rotated) rotate_host_key(n, emit);
                where.host_key = ssh::HostKeyPin::public_key(n.host_public_key);
                remote = RemoteNode::start(where, spec_, pool_id_, node, n.instance_id, emit);
                break;
            } catch (const ssh::HostKeyMismatch&) {
                if (attempt >= 30 || Clock::now() > until || stopping()) throw;
            } catch (const ssh::AuthenticationError&) {
                if (attempt >= 30 || Clock::now() > until || stopping()) throw;
            } catch (const ssh::ConnectError&) {
                if (attempt >= 30 || Clock::now() > until || stopping()) throw;
            }
            std::this_thread::sleep_for(
                std::min<Clock::duration>(std::chrono::seconds(5), boot_wait / 4));
        }
        std::lock_guard lk(m_);
        n.remote = std::move(remote);
    }

    // Replaces the host key the node got in its boot script (readable there through the
    // cloud's metadata) with one made on the node. Over a session that pins the boot-script key,
    // a root script finds the sshd serving it, generates a fresh ed25519 key, moves it over the
    // host key file that sshd loads, removes cloud-init's copies of the script, prints the new
    // public key and makes sshd load it (SIGHUP). The new key arrives over the authenticated,
    // pinned session, so pinning it is no trust on first use. A node where this fails keeps the
    // boot-script key, with an ErrorEvent. Throws what ssh::Session throws while connecting.
    void rotate_host_key(CloudNode& n, const std::function<void(Event)>& emit) {
        std::istringstream words(n.host_public_key);
        std::string type, blob;
        words >> type >> blob;
        ssh::SessionOptions o;
        o.host = n.public_ip;
        o.port = static_cast<std::uint16_t>(n.ssh_port);
        o.user = login_.user;
        o.private_key_file = dir_ / "key";
        o.host_key = ssh::HostKeyPin::public_key(n.host_public_key);
        o.connect_timeout = std::chrono::seconds(15);
        o.connect_attempts = 3;
        o.retry_auth_failure = true;  // authorized_keys may not be written yet
        ssh::Session session(o);
        scripts::ScriptValues values("sky boot: replaces the node's host key");
        values.word("old_blob", blob);
        const std::string script = values.then({scripts::rotate_host_key_sh()});
        std::string failure;
        std::string fresh;
        try {
            ssh::ExecOptions eo;
            eo.stdin_data = script;
            eo.timeout = std::chrono::seconds(60);
            ssh::ExecResult r = session.exec(
                "if [ \"$(id -u)\" = 0 ]; then exec bash -s; else exec sudo -n bash -s; fi", eo);
            std::istringstream out(r.out);
            for (std::string line; std::getline(out, line);)
                if (line.rfind("ssh-ed25519 ", 0) == 0) fresh = std::string(trim(line));
            if (r.exit_status != 0) {
                std::string err = std::string(trim(r.err));
                if (auto nl = err.rfind('\n'); nl != std::string::npos) err = err.substr(nl + 1);
                failure = fmt::format("exit status {}: {}", r.exit_status, err.substr(0, 200));
            } else if (fresh.empty()) {
                failure = "no new public key came back";
            } else {
                std::istringstream fw(fresh);
                std::string fresh_type, fresh_blob;
                fw >> fresh_type >> fresh_blob;
                (void)ssh::fingerprint_of_public_key(fresh);  // throws when it does not parse
                if (fresh_blob == blob) failure = "the node presented the same key again";
            }
        } catch (const std::exception& e) {
            failure = e.what();
        }
        n.host_key_rotated = true;
        if (!failure.empty() && login_.launch_data_readable) {
            // Anyone who can read the machine's launch data through the cloud's API has this
            // key: the node is not used.
            int node = -1;
            {
                std::lock_guard lk(m_);
                for (std::size_t i = 0; i < nodes_.size(); ++i)
                    if (nodes_[i].instance_id == n.instance_id) node = static_cast<int>(i);
            }
            throw BootstrapError(
                node, n.instance_id, "connect",
                fmt::format("{}: host key of {} not rotated ({}); its launch data, "
                            "readable through {}'s API, holds the key it has now",
                            provider_, n.instance_id, failure, provider_));
        }
        if (!failure.empty()) {
            emit(ErrorEvent{fmt::format("{}: host key of {} not rotated ({}); the node keeps the "
                                        "key from its boot script",
                                        provider_, n.instance_id, failure),
                            n.instance_id});
            return;
        }
        n.host_public_key = fresh;
    }

    // Every address of the pool's live machines, for their host firewalls (not a machine that
    // is gone: its address may be another customer's by now).
    std::vector<std::string> pool_addresses() const {
        std::lock_guard lk(m_);
        std::vector<std::string> out;
        for (const auto& n : nodes_)
            if (!n.gone)
                for (const std::string* a : {&n.public_ip, &n.private_ip})
                    if (!a->empty() && std::find(out.begin(), out.end(), *a) == out.end())
                        out.push_back(*a);
        return out;
    }

    // A replacement joined: the other machines' host firewalls forget the machine it replaced
    // (`left`: its addresses, which the cloud may give to another customer next) and admit it
    // (its own admits them as it starts). Runs before the replacement's worker starts, so
    // before any rendezvous.
    void admit_joined(int node, const CloudNode& joined, const std::vector<std::string>& left,
                      const std::function<void(Event)>& emit) {
        std::vector<std::string> addresses;
        for (const std::string* a : {&joined.public_ip, &joined.private_ip})
            if (!a->empty()) addresses.push_back(*a);
        const auto others = admitting_nodes(node);
        const auto forget = forgettable(left);
        for (auto& [id, r] : others)
            if (std::string why = r->admit_peers(addresses, forget); !why.empty())
                emit(ErrorEvent{fmt::format("{}: {} could not admit the replacement {} through its "
                                            "host firewall ({}): they cannot reach each other",
                                            provider_, id, joined.instance_id, why),
                                id});
    }

    // A machine left the pool for good (released): the others' host firewalls forget it.
    void forget_left(int node, const std::vector<std::string>& left,
                     const std::function<void(Event)>& emit) {
        const auto forget = forgettable(left);
        if (forget.empty()) return;
        for (auto& [id, r] : admitting_nodes(node))
            if (std::string why = r->admit_peers({}, forget); !why.empty())
                emit(ErrorEvent{fmt::format("{}: {} could not forget a released machine's "
                                            "address through its host firewall ({}): whoever "
                                            "gets that address next reaches its ports",
                                            provider_, id, why),
                                id});
    }

    // The live machines other than `node`'s, whose host firewalls the client manages.
    std::vector<std::pair<std::string, RemoteNode*>> admitting_nodes(int node) const {
        std::vector<std::pair<std::string, RemoteNode*>> others;
        std::lock_guard lk(m_);
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (static_cast<int>(i) != node && !nodes_[i].gone)
                if (auto* r = dynamic_cast<RemoteNode*>(nodes_[i].remote.get()))
                    others.emplace_back(nodes_[i].instance_id, r);
        return others;
    }

    // Of a departed machine's addresses, those no live machine of the pool has now.
    std::vector<std::string> forgettable(const std::vector<std::string>& left) const {
        const auto live = pool_addresses();
        std::vector<std::string> out;
        for (const auto& a : left)
            if (std::find(live.begin(), live.end(), a) == live.end()) out.push_back(a);
        return out;
    }

    std::shared_ptr<ship::PoolShipment> shipment() {
        std::lock_guard lk(m_);
        if (!shipment_) shipment_ = std::make_shared<ship::PoolShipment>(ship::this_program());
        return shipment_;
    }

    bool stopping() const {
        std::lock_guard lk(m_);
        return stopping_;
    }

    std::unique_ptr<CloudAdapter> api_;
    NodeStarter starter_;
    PoolSpec spec_;
    std::string pool_id_;
    Ledger* ledger_ = nullptr;
    std::string provider_;
    CloudLogin login_;
    CloudTimings timings_;  // the adapter's (login()'s unless it says otherwise)
    std::string name_;      // "sky-<pool id>": key pair, firewall, tags
    std::string region_;
    std::vector<Offer> offers_;  // what provision() selected, cheapest first

    std::mutex infra_m_;  // guards the key directory and the infrastructure flag
    std::filesystem::path dir_;
    std::string public_key_;
    bool infra_created_ = false;
    std::atomic<bool> launch_sent_{false};          // a launch was asked for (a machine may exist)
    std::atomic<bool> credentials_refused_{false};  // the cloud refused them (CredentialsRefused)
    std::atomic<bool> stopped_{false};              // stop_all() ran (or runs): it runs once
    std::mutex launch_m_;   // one launch (and a lost one's lookup) at a time in the pool
    int lost_unfound_ = 0;  // lost launches whose machine was not found (guarded by launch_m_)

    mutable std::mutex m_;
    std::shared_ptr<ship::PoolShipment> shipment_;
    std::deque<CloudNode> nodes_;        // by index; see add()
    std::vector<std::string> launched_;  // every id a launch returned, until confirmed gone
    std::set<std::string> terminated_;   // confirmed gone
    int replacements_ = 0;
    bool stopping_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cloud_backend(std::unique_ptr<CloudAdapter> adapter,
                                            const BackendContext& context, NodeStarter starter) {
    if (!adapter) throw ConfigError("PoolSpec::provider: the cloud adapter is null");
    return std::make_unique<CloudBackend>(std::move(adapter), context, std::move(starter));
}

ProviderDescriptor custom_provider() {
    ProviderDescriptor d({
        .exposure =
            [](const PoolSpec&) {
                return Exposure::open_to_others(fmt::format(
                    "sky cannot tell what admits connections to a custom cloud's machines: {}: "
                    "make sure only the pool's own machines can reach them (docs/distributed.md)",
                    rendezvous_services));
            },
        .billing = BillingPolicy{},  // per second, no minimum: the adapter's prices say the rest
        .runs_on_this_machine = false,
    });
    d.name = "custom";
    d.validate = [](const PoolSpec& spec, std::vector<std::string>& problems) {
        const CustomCloud* c = spec.provider.get<CustomCloud>();
        if (c && !c->make) problems.push_back("provider: the custom cloud has no adapter");
        if (c && c->name.empty())
            problems.push_back("provider: the custom cloud's name() is empty");
    };
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return make_cloud_backend(c.spec.provider.get<CustomCloud>()->make(), c);
    };
    return d;
}

}  // namespace sky::detail
