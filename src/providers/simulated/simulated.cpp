// sky::Simulated: a cloud in a box, as one more adapter on the cloud layer. Everything a pool
// does on a real cloud (offers and prices, launch rounds, capacity errors, waiting, the ledger,
// replacement, terminate-and-confirm, the sweep by tag) is the cloud layer's own code; this file
// is only the "cloud": a table of machines, and a node starter that boots each machine's worker
// process with the events of a cloud node.
//
// Machines are also written to <sky home>/simulated/<id>.json (the client's and the worker's
// process identities), so that `sky ls` and `sky gc` in another process see them: a machine is
// running while its worker process (or, before it has one, its client) runs.
#include "providers/simulated/simulated.hpp"

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
#include "providers/simulated/provider.hpp"
#include "runtime/protocol.hpp"
#include "sky/catalog.hpp"
#include "sky/cloud.hpp"
#include "sky/detail/registry.hpp"
#include "util/private_files.hpp"

namespace sky::detail {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using State = CloudInstance::State;
using nlohmann::json;

constexpr const char* kProvider = "simulated";
// The offers are AWS's catalog rows of this region, relabelled: real instance types and prices.
constexpr const char* kOffersFrom = "aws";
constexpr const char* kRegion = "us-east-1";

// ---------------------------------------------------------------------------------------------
// Machine records for other processes (`sky ls`, `sky gc`).

struct Record {
    std::string id, pool, instance_type;
    int node = 0;
    bool spot = false;
    long owner_pid = 0;
    std::string owner_start;
    long worker_pid = 0;
    std::string worker_start;
};

fs::path records_dir() {
    try {
        return Ledger::directory().parent_path() / "simulated";
    } catch (const std::exception&) {
        return {};  // no home: records are this process's alone
    }
}

// Ids name files: only what sky makes ("sim-<pool id>-<hex>") is looked up.
bool safe_id(std::string_view id) {
    if (id.empty() || id.size() > 100 || id.rfind("sim-", 0) != 0) return false;
    return std::all_of(id.begin(), id.end(),
                       [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
}

void write_record(const Record& r) noexcept {
    try {
        const fs::path dir = records_dir();
        if (dir.empty() || !safe_id(r.id)) return;
        ensure_private_dir(dir);  // throws for a directory another user could write
        json j = {{"id", r.id},
                  {"pool", r.pool},
                  {"instance_type", r.instance_type},
                  {"node", r.node},
                  {"spot", r.spot},
                  {"owner_pid", r.owner_pid},
                  {"owner_start", r.owner_start},
                  {"worker_pid", r.worker_pid},
                  {"worker_start", r.worker_start}};
        const std::string text = j.dump() + "\n";
        const fs::path tmp = dir / (r.id + ".tmp");
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) return;
        bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        if (ok) ok = ::rename(tmp.c_str(), (dir / (r.id + ".json")).c_str()) == 0;
        if (!ok) ::unlink(tmp.c_str());
    } catch (...) {
        // Best effort: the machine still is in this process's table and in the ledger.
    }
}

void remove_record(const std::string& id) noexcept {
    const fs::path dir = records_dir();
    if (dir.empty() || !safe_id(id)) return;
    std::error_code ec;
    fs::remove(dir / (id + ".json"), ec);
}

// A record tells `sky gc` which process to SIGKILL: believed only in a private directory, from a
// file of this user that nobody else could write (never through a symbolic link).
std::optional<Record> read_record(const fs::path& file) noexcept {
    try {
        if (!is_private_dir(file.parent_path())) return std::nullopt;
        const json j = json::parse(read_private_file(file, 64 * 1024));
        Record r;
        r.id = j.at("id").get<std::string>();
        r.pool = j.at("pool").get<std::string>();
        r.instance_type = j.at("instance_type").get<std::string>();
        r.node = j.at("node").get<int>();
        r.spot = j.at("spot").get<bool>();
        r.owner_pid = j.at("owner_pid").get<long>();
        r.owner_start = j.at("owner_start").get<std::string>();
        r.worker_pid = j.at("worker_pid").get<long>();
        r.worker_start = j.at("worker_start").get<std::string>();
        if (!safe_id(r.id)) return std::nullopt;
        return r;
    } catch (...) {
        return std::nullopt;  // torn or foreign: not a machine
    }
}

std::optional<Record> find_record(const std::string& id) {
    const fs::path dir = records_dir();
    if (dir.empty() || !safe_id(id)) return std::nullopt;
    return read_record(dir / (id + ".json"));
}

std::vector<Record> all_records() {
    std::vector<Record> out;
    const fs::path dir = records_dir();
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) return out;
    int seen = 0;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        if (++seen > 100000) break;
        if (it->path().extension() != ".json") continue;
        if (auto r = read_record(it->path())) out.push_back(std::move(*r));
    }
    return out;
}

// A machine runs while its worker does; before it has one, while its client does.
bool record_alive(const Record& r) {
    if (r.worker_pid > 0) {
        const std::string now = process_identity(r.worker_pid);
        return !now.empty() && now == r.worker_start;
    }
    const std::string now = process_identity(r.owner_pid);
    return !now.empty() && now == r.owner_start;
}

CloudInstance instance_of(const Record& r, bool alive) {
    CloudInstance i;
    i.id = r.id;
    i.state = alive ? State::running : State::gone;
    i.public_ip = i.private_ip = "127.0.0.1";
    i.spot = r.spot;
    i.pool_id = r.pool;
    i.instance_type = r.instance_type;
    if (!alive) i.reason = "its process has ended";
    return i;
}

CloudInstance describe_record(const std::string& id) {
    if (auto r = find_record(id)) {
        const bool alive = record_alive(*r);
        if (!alive) remove_record(id);
        return instance_of(*r, alive);
    }
    CloudInstance u;
    u.id = id;
    u.state = State::unknown;
    return u;
}

void terminate_record(const std::string& id) {
    auto r = find_record(id);
    if (!r) return;
    // Only the recorded process: the identity check keeps a reused pid safe.
    if (r->worker_pid > 0 && process_identity(r->worker_pid) == r->worker_start)
        ::kill(static_cast<pid_t>(r->worker_pid), SIGKILL);
    remove_record(id);
}

// ---------------------------------------------------------------------------------------------
// The cloud of one pool.

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

// ---------------------------------------------------------------------------------------------
// The adapter: what the cloud layer sees.

class SimulatedAdapter final : public CloudAdapter {
public:
    /// `cloud` null: only the records of other processes (`sky ls`, `sky gc`).
    SimulatedAdapter(std::shared_ptr<SimCloud> cloud, std::uint64_t seed)
        : cloud_(std::move(cloud)), seed_(seed) {}

    std::string name() const override { return kProvider; }
    std::string region() const override { return kRegion; }

    // The catalog's rows of AWS in one region, relabelled: the catalog's instance types and
    // on-demand prices. The catalog knows AWS's spot prices only live (DescribeSpotPriceHistory),
    // so this cloud's spot market quotes them: a fixed fraction of the on-demand price per
    // instance type, from 0.25 to 0.45, drawn from the seed.
    std::vector<Offer> live_offers(const Catalog& catalog, const SelectionRequest&,
                                   const std::function<void(Event)>&) override {
        std::vector<Offer> out;
        for (Offer o : catalog.offers(kOffersFrom)) {
            if (o.region != kRegion) continue;
            o.provider = kProvider;
            if (o.spot_available && !o.spot_price)
                o.spot_price =
                    std::round(o.on_demand_price * spot_fraction(o.instance_type) * 10000.0) /
                    10000.0;
            out.push_back(std::move(o));
        }
        return out;
    }

    std::string launch(const LaunchRequest& r) override {
        if (!cloud_) throw std::runtime_error("this simulated cloud only lists machines");
        return cloud_->launch(r);
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        if (cloud_) return cloud_->describe(ids);
        std::vector<CloudInstance> out;
        for (const auto& id : ids) out.push_back(describe_record(id));
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        if (cloud_) return cloud_->terminate(ids);
        for (const auto& id : ids) terminate_record(id);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        if (cloud_) return cloud_->list(pool_id);
        std::vector<CloudInstance> out;
        for (const Record& r : all_records()) {
            if (!pool_id.empty() && r.pool != pool_id) continue;
            if (record_alive(r))
                out.push_back(instance_of(r, true));
            else
                remove_record(r.id);
        }
        return out;
    }

private:
    double spot_fraction(std::string_view instance_type) const {
        // FNV-1a from a seeded basis, then splitmix64.
        std::uint64_t h = fnv1a(instance_type, fnv1a_basis ^ seed_);
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
        return 0.25 + 0.20 * static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);
    }

    std::shared_ptr<SimCloud> cloud_;
    std::uint64_t seed_ = 0;
};

// ---------------------------------------------------------------------------------------------
// A stream that counts the calls the worker completes (result and error frames), for
// lose_after_calls: the count is the client's, so the worker runtime knows nothing of faults.
// It only reads frame headers to find where frames end; the pool's own reader decodes them.

class CountingStream final : public io::Stream {
public:
    CountingStream(std::unique_ptr<io::Stream> inner, std::function<void()> on_call_done)
        : inner_(std::move(inner)), on_call_done_(std::move(on_call_done)) {}

    executor_type get_executor() override { return inner_->get_executor(); }
    void async_read_some(boost::asio::mutable_buffer buffer, io::IoHandler handler) override {
        // Completions run on the stream's strand, one read at a time: the scan needs no lock.
        inner_->async_read_some(buffer, [this, buffer, h = std::move(handler)](
                                            boost::system::error_code ec, std::size_t n) mutable {
            scan({static_cast<const std::byte*>(buffer.data()), n});
            std::move(h)(ec, n);
        });
    }
    void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                          io::IoHandler handler) override {
        inner_->async_write_some(buffers, std::move(handler));
    }
    std::size_t try_write_some(std::span<const boost::asio::const_buffer> buffers) override {
        return inner_->try_write_some(buffers);
    }
    void close() noexcept override { inner_->close(); }
    std::string describe() const override { return inner_->describe(); }
    std::string failure() const override { return inner_->failure(); }

private:
    void scan(std::span<const std::byte> bytes) {
        while (!bytes.empty() && !lost_track_) {
            if (skip_ > 0) {
                const auto k =
                    static_cast<std::size_t>(std::min<std::uint64_t>(skip_, bytes.size()));
                skip_ -= k;
                bytes = bytes.subspan(k);
            } else {
                const std::size_t k = std::min(frame_header_size - have_, bytes.size());
                std::memcpy(header_.data() + have_, bytes.data(), k);
                have_ += k;
                bytes = bytes.subspan(k);
                if (have_ < frame_header_size) break;
                have_ = 0;
                try {
                    const FrameHeader h = decode_header(header_.data(), ~std::uint64_t{0});
                    skip_ = h.length;
                    counting_ =
                        h.call_id != 0 && (h.type == MsgType::result || h.type == MsgType::error);
                } catch (const std::exception&) {
                    lost_track_ = true;  // the pool's reader reports the bad stream
                    return;
                }
            }
            // A frame ends here: the call it answers is complete once all of it was delivered.
            if (skip_ == 0 && have_ == 0 && counting_) {
                counting_ = false;
                on_call_done_();
            }
        }
    }

    std::unique_ptr<io::Stream> inner_;
    std::function<void()> on_call_done_;
    std::array<std::byte, frame_header_size> header_{};
    std::size_t have_ = 0;
    std::uint64_t skip_ = 0;
    bool counting_ = false;
    bool lost_track_ = false;
};

// ---------------------------------------------------------------------------------------------
// A simulated machine's node: its bootstrap events and its worker process.

// The image's phases, as its bootstrap script announces them (bootstrap/image.cpp), and the one
// where a failing or slow bootstrap fault strikes: the first that runs the user's packages or
// commands (apt, pip, setup). An image with none of them gets a "setup" phase for the fault.
std::vector<std::string> image_phases(const Image& img, const PoolSpec& spec, bool fault,
                                      std::string& fault_phase) {
    std::vector<std::string> p;
    if (!img.apt.empty()) p.push_back("apt");
    if (!img.python.empty() || !img.pip.empty()) p.push_back("python");
    if (!img.pip.empty()) p.push_back("pip");
    p.push_back("env");
    if (!img.files.empty()) p.push_back("files");
    if (!img.setup.empty() || (fault && img.apt.empty() && img.pip.empty())) p.push_back("setup");
    if (spec.timeout.count() > 0) p.push_back("ttl");
    p.push_back("done");
    fault_phase = !img.apt.empty() ? "apt" : !img.pip.empty() ? "pip" : "setup";
    return p;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    if (out.empty()) out.emplace_back();
    return out;
}

class SimulatedNode final : public NodeHandle {
public:
    static std::unique_ptr<SimulatedNode> start(const std::shared_ptr<SimCloud>& cloud,
                                                const NodeStartRequest& r,
                                                const std::function<void(Event)>& emit) {
        const std::string& id = r.machine.id;
        const PoolSpec& spec = *r.spec;
        emit(BootstrapStarting{id});
        const SimCloud::BootFaults faults = cloud->claim_boot_faults(r.node);
        std::string fault_phase;
        std::vector<std::string> phases = {"check", "upload"};
        const bool fault = faults.fail || faults.delay.count() > 0;
        for (auto& p : image_phases(spec.image, spec, fault, fault_phase)) phases.push_back(p);
        for (const auto& phase : phases) {
            emit(BootstrapProgress{id, phase});
            if (phase != fault_phase) continue;
            // A slow bootstrap: bounded by its delay, cut short when the pool ends the machine.
            const auto until = Clock::now() + faults.delay;
            while (Clock::now() < until) {
                if (cloud->machine_gone(id))
                    throw BootstrapError(r.node, id, phase, "the machine ended during bootstrap");
                std::this_thread::sleep_for(
                    std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
            }
            if (faults.fail) {
                auto out = lines_of(*faults.fail);
                std::string message =
                    fmt::format("the bootstrap script failed with exit status 100: {}", out.back());
                throw BootstrapError(r.node, id, phase, std::move(message), std::move(out));
            }
        }
        emit(BootstrapProgress{id, "worker"});
        std::unique_ptr<SimulatedNode> n(new SimulatedNode(cloud, id));
        try {
            n->worker_ = std::make_unique<LocalWorker>(spec, "");
        } catch (const std::exception& e) {
            throw BootstrapError(r.node, id, "worker", "could not start the worker", {e.what()});
        }
        cloud->attach(id, n->worker_.get(), emit);
        emit(BootstrapProgress{id, "watchdog"});
        emit(BootstrapCompleted{id});
        return n;
    }

    ~SimulatedNode() override {
        cloud_->detach(id_, worker_.get());
        worker_.reset();
    }

    std::unique_ptr<io::Stream> connect_worker() override {
        std::weak_ptr<SimCloud> cloud = cloud_;
        return std::make_unique<CountingStream>(worker_->connect_worker(), [cloud, id = id_] {
            if (auto c = cloud.lock()) c->call_completed(id);
        });
    }
    const std::string& token() const noexcept override { return worker_->token(); }
    void restart_worker(const std::function<void(Event)>& emit) override {
        emit(BootstrapProgress{id_, "worker"});
        worker_->restart_worker(emit);
        cloud_->attach(id_, worker_.get(), emit);
    }
    NodeExit exit_reason() override { return worker_->exit_reason(); }
    bool reachable() const override { return cloud_->machine_up(id_); }
    void stop() noexcept override { worker_->stop(); }

private:
    SimulatedNode(std::shared_ptr<SimCloud> cloud, std::string id)
        : cloud_(std::move(cloud)), id_(std::move(id)) {}

    std::shared_ptr<SimCloud> cloud_;
    std::string id_;
    std::unique_ptr<LocalWorker> worker_;
};

}  // namespace

ProviderDescriptor simulated_provider() {
    ProviderDescriptor d({
        // A simulated node is a worker process on this machine.
        .exposure = [](const PoolSpec&) { return this_machine_exposure(); },
        .billing = BillingPolicy{},  // per second at the catalog's prices, no minimum
        .runs_on_this_machine = true,
    });
    d.validate = [](const PoolSpec& spec, std::vector<std::string>& problems) {
        const Simulated* s = spec.provider.get<Simulated>();
        if (!s) return;
        try {
            // An autoscaled pool's faults may name any index below max.
            check_simulated(with_simulated_env(*s), std::max(spec.nodes, spec.autoscale.max),
                            problems);
        } catch (const ConfigError& e) {
            problems.push_back(std::string("provider: ") + e.what());
        }
    };
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        Simulated config = with_simulated_env(*c.spec.provider.get<Simulated>());
        std::vector<std::string> problems;
        check_simulated(config, std::max(c.spec.nodes, c.spec.autoscale.max), problems);
        if (!problems.empty()) throw ConfigError("PoolSpec::" + problems.front());
        const std::uint64_t seed = config.seed;
        auto cloud = std::make_shared<SimCloud>(std::move(config), c.pool_id);
        SimCloud::watch_start(cloud);
        NodeStarter starter =
            [cloud](const NodeStartRequest& r,
                    const std::function<void(Event)>& emit) -> std::unique_ptr<NodeHandle> {
            return SimulatedNode::start(cloud, r, emit);
        };
        return make_cloud_backend(std::make_unique<SimulatedAdapter>(cloud, seed), c,
                                  std::move(starter));
    };
    d.make_adapter = [](std::string_view) -> std::unique_ptr<CloudAdapter> {
        return std::make_unique<SimulatedAdapter>(nullptr, 0);
    };
    add_cloud_gc(d);
    return d;
}

}  // namespace sky::detail
