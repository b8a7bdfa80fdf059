// sky::Slurm: a pool is one Slurm job. sbatch asks for the pool's nodes with a batch script
// that only holds the allocation; each node's worker is a step of that job started from the
// login node (srun --overlap), listening on the node's cluster address; the client reaches it
// through the login node (an SSH direct-tcpip channel) and the usual authenticated handshake.
// Leaving the pool cancels the job (scancel) and waits until Slurm has ended it.
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "ledger/ledger.hpp"
#include "node/scripts.hpp"
#include "pool/backend.hpp"
#include "providers/cloud/collect.hpp"
#include "providers/remote/bring_up.hpp"
#include "providers/slurm/jobs.hpp"
#include "providers/slurm/login.hpp"
#include "providers/slurm/provider.hpp"
#include "providers/slurm/scripts.hpp"
#include "providers/slurm/slurm_adapter.hpp"
#include "providers/slurm/slurm_commands.hpp"
#include "providers/slurm/srun_shell.hpp"
#include "runtime/node_marks.hpp"
#include "ship/closure.hpp"
#include "ship/shipment.hpp"
#include "ssh/session.hpp"
#include "util/random.hpp"
#include "util/shell.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using namespace slurm;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kCommandLimit = seconds(60);
// scancel sends SIGTERM, then SIGKILL after the cluster's KillWait (30 s by default): the job
// is gone well within this.
constexpr auto kCancelLimit = seconds(120);
constexpr std::size_t kTailLines = 20;
// How long a worker's launcher that ended idle waits for a fresh step of the pool to take its
// node before it cancels the job: the pool's reconnect window closes with the worker's idle
// end (at most a heartbeat, 3 s, later), then it asks why and starts the fresh step.
constexpr auto kSupersededGrace = seconds(30);

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

std::vector<std::string> last_lines(const node::CommandOutcome& r, std::size_t n = kTailLines) {
    return r.last_lines(n);
}

// A node-side script of scripts/ after the marks it prints (node_marks.hpp), as its values.
std::string with_marks(std::string_view script) {
    return scripts::ScriptValues("sky slurm: the program's placement on a compute node")
        .word("sky_refused_mark", node::marks::refused.text)
        .word("sky_incoming_mark", node::marks::incoming.text)
        .word("sky_placed_mark", node::marks::placed.text)
        .then({script});
}

bool is_ipv4(const std::string& s) {
    static const std::regex re(R"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})");
    return std::regex_match(s, re);
}

// One compute node of the pool's job.
struct Node {
    std::string name;     // Slurm's node name
    std::string address;  // IPv4 address on the cluster's network (workers listen there)
    std::string home;     // $HOME there
    std::string prog;     // the program's directory there
    std::string instance_id;
    std::string job;         // the Slurm job that holds it
    bool announced = false;  // InstanceProvisioned and its bootstrap events sent
    int generation = 0;      // worker steps started on it
    std::string token;
    std::uint16_t port = 0;  // where its worker listens (0: none started yet)
};

class SlurmBackend final : public Backend {
public:
    SlurmBackend(const PoolSpec& spec, std::string pool_id, Ledger* ledger)
        : spec_(spec),
          cfg_(*spec.provider.get<Slurm>()),
          pool_id_(std::move(pool_id)),
          job_name_("sky-" + pool_id_),
          ledger_(ledger) {
        instance_type_ =
            "slurm:" + (cfg_.partition.empty() ? std::string("default") : cfg_.partition);
        event_id_ = "slurm-" + pool_id_;
    }
    ~SlurmBackend() override { stop_all(); }

    void provision(int count, const std::function<void(Event)>& emit) override {
        emit(InstanceLaunching{count, instance_type_, "slurm"});
        try {
            auto fresh = open_login(login_options());
            std::lock_guard lk(m_);
            login_ = std::move(fresh);
        } catch (const ssh::SshError& e) {
            throw ProvisionError(
                fmt::format("slurm: cannot reach the login node {}: {}", cfg_.login, e.what()));
        }
        try {
            submit_and_wait(count, emit);
        } catch (const ssh::SshError& e) {
            // The login node's connection broke (sshd restarted, the link cut) while the pool
            // started; stop_all() connects again to end the job.
            throw ProvisionError(fmt::format(
                "slurm: the connection to the login node {} failed: {}", cfg_.login, e.what()));
        }
    }

    void submit_and_wait(int count, const std::function<void(Event)>& emit) {
        auto& login = *login_;
        check_tools(login);
        pool_dir_ = pool_dir(login, pool_id_);
        auto mk = login.script(fmt::format("umask 077; mkdir -p {0} && chmod 700 {1}/.sky "
                                           "{1}/.sky/slurm {0}",
                                           shell_quote(pool_dir_), shell_quote(login.home())),
                               kCommandLimit);
        if (mk.status != 0)
            throw ProvisionError(fmt::format("slurm: cannot make {} on {}: {}", pool_dir_,
                                             login.describe(), mk.summary()));

        BatchRequest& req = request_;
        req.job_name = job_name_;
        req.nodes = count;
        req.time_limit = spec_.timeout;
        req.partition = cfg_.partition;
        req.account = cfg_.account;
        req.qos = cfg_.qos;
        req.constraint = cfg_.constraint;
        req.reservation = cfg_.reservation;
        if (spec_.cpu) req.min_cpus = *spec_.cpu;
        if (spec_.memory)
            req.memory_mb = static_cast<long>(parse_memory_gb(*spec_.memory) * 1024.0 + 0.5);
        if (spec_.accelerator) {
            auto g = login.run(sinfo_gres_argv(cfg_.partition), kCommandLimit);
            if (g.status != 0)
                throw ProvisionError(
                    fmt::format("slurm: sinfo failed on {}: {}", login.describe(), g.summary()));
            const GresChoice c = choose_gres(*spec_.accelerator, g.out, cfg_.partition);
            req.gres = c.gres;
            emit(BootstrapProgress{event_id_, "gres " + c.note});
        }

        // The program reaches the login node's store before the job is queued: an allocation
        // never waits for an upload.
        try {
            prog_on_login_ = ship_program(login, event_id_, pool_dir_, emit);
        } catch (const ship::ShipFailure& e) {
            throw BootstrapError(
                0, event_id_, e.phase,
                "cannot put the program on the login node: " + std::string(e.what()), e.output);
        } catch (const ssh::SshError&) {
            throw;
        } catch (const std::exception& e) {
            throw BootstrapError(
                0, event_id_, "upload",
                "cannot put the program on the login node: " + std::string(e.what()));
        }

        // In the ledger before sbatch runs: how to reach the cluster and the job's name, so
        // that `sky gc` finds the job (and any replacement job, which has the same name) even
        // when this client dies before sbatch answers.
        record(ref(""));
        submitted_ = true;
        started_at_ = Clock::now();
        const std::string id = submit(count, spec_.timeout, "", emit);
        start_watchdog(login);
        const JobState running = wait_running(id, emit);
        auto placed = place_nodes(id, running, count, emit);
        std::lock_guard lk(m_);
        nodes_ = std::move(placed);
    }

    // sbatch for `count` nodes of the pool's request, holding them for `limit`; the job's id,
    // in the ledger and in jobs_ before this returns. `why`: what the job replaces, for the
    // event ("" for the pool's first job).
    std::string submit(int count, std::chrono::seconds limit, const std::string& why,
                       const std::function<void(Event)>& emit) {
        auto& login = *login_;
        BatchRequest req = request_;
        req.nodes = count;
        req.time_limit = limit;
        auto sb = login.run(sbatch_argv(req), kCommandLimit, batch_script(pool_id_));
        const std::string id = parse_sbatch(sb.out);
        if (sb.status != 0 || id.empty())
            throw ProvisionError(fmt::format("slurm: sbatch refused the pool's {}job on {}: {}",
                                             why.empty() ? "" : "replacement ", login.describe(),
                                             sb.summary()));
        {
            std::lock_guard lk(m_);
            jobs_.push_back(id);
            leads_[id] = notice_lead(limit);
        }
        record(ref(id));
        emit(BootstrapProgress{"slurm-job-" + id, fmt::format("submitted as job {}{} ({})", id,
                                                              why.empty() ? "" : " " + why,
                                                              fmt::join(sbatch_argv(req), " "))});
        return id;
    }

    std::string head_address() const override {
        std::lock_guard lk(m_);
        return nodes_.empty() ? std::string("127.0.0.1") : nodes_.front().address;
    }

    NodeStart connect(int i, const std::function<void(Event)>& emit) override {
        Node n;
        bool job_ended = false;
        {
            std::lock_guard lk(m_);
            n = nodes_.at(static_cast<std::size_t>(i));
            job_ended = ended_.count(n.job) > 0;
        }
        // The job that held the node ended: a node of a new job takes its place.
        if (job_ended) n = replacement(i, n.job, emit);
        if (!n.announced) {
            emit(InstanceProvisioned{n.instance_id, i, false, "slurm", n.address, instance_type_,
                                     0.0, std::nullopt});
            emit(BootstrapStarting{n.instance_id});
            emit(BootstrapProgress{n.instance_id, "program " + placement_});
            bootstrap_image(i, n, emit);
        }
        emit(BootstrapProgress{n.instance_id, "worker"});
        const std::uint16_t port = start_worker(i, n);
        NodeStart s;
        s.instance.id = n.instance_id;
        s.instance.node = i;
        s.instance.provider = "slurm";
        s.instance.instance_type = instance_type_;
        s.instance.private_ip = n.address;
        s.token = n.token;
        // The login node -> compute node hop is plain TCP on the cluster network (and srun's
        // stdin and output are in clear there): the stream is sealed, and the pool's
        // environment travels in its hello, not on the step's stdin.
        s.seal = true;
        s.env = spec_.env;
        try {
            s.stream = login_->open_channel(n.address, port);
        } catch (const std::exception& e) {
            throw BootstrapError(
                i, n.instance_id, "connect",
                fmt::format("cannot reach the worker on {} ({}:{}) from {}: {}", n.name, n.address,
                            port, login_->describe(), e.what()));
        }
        if (!n.announced) emit(BootstrapCompleted{n.instance_id});
        std::lock_guard lk(m_);
        auto& kept = nodes_.at(static_cast<std::size_t>(i));
        kept.announced = true;
        kept.generation = n.generation;
        kept.token = n.token;
        kept.port = port;
        return s;
    }

    bool can_reconnect(int i) const override {
        // A worker listens for its client after a drop while its job runs (its step, and its
        // kept calls, outlive the client's connection; the login node's srun is detached).
        // Through the login node only: there a refused channel tells a gone worker from a
        // broken link at once. A client on the login node itself connects to the workers
        // directly, and a drop loses the node at once, as before.
        std::lock_guard lk(m_);
        const auto& n = nodes_.at(static_cast<std::size_t>(i));
        return !cfg_.login.empty() && !stopping_ && n.port != 0 && !ended_.count(n.job);
    }

    std::unique_ptr<io::Stream> reconnect(int i, milliseconds within) override {
        Node n;
        {
            std::lock_guard lk(m_);
            n = nodes_.at(static_cast<std::size_t>(i));
        }
        const auto deadline = Clock::now() + within;
        const auto left = [&] {
            return std::max(milliseconds(500),
                            std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
        };
        // The connection to the login node carried every node's channel: the first node to
        // notice opens a new one, and moves the watchdog over to it (the old one watches the
        // sshd process of the dead connection, and would cancel the job).
        if (!login_->alive() && login_->reconnect(left())) start_watchdog(*login_);
        const auto connection = login_->connection();
        try {
            // A live login node answers a channel request within a round trip.
            return login_->open_channel(n.address, n.port, std::min(left(), milliseconds(2000)));
        } catch (const node::ChannelRefused& e) {
            throw WorkerGone(fmt::format("no worker listens on {} ({}:{}) any more: {}", n.name,
                                         n.address, n.port, e.what()));
        } catch (...) {
            // No answer within 2 s: the connection is as dead as a closed one (half-open); the
            // next attempt makes a new one.
            login_->drop(connection);
            throw;
        }
    }

    NodeExit exit_reason(int i) override {
        Node n;
        {
            std::lock_guard lk(m_);
            n = nodes_.at(static_cast<std::size_t>(i));
        }
        if (!login_ || !login_->alive())
            return {NodeLostError::Reason::unreachable,
                    fmt::format("the SSH connection to the login node {} was lost", cfg_.login)};
        try {
            auto j = settled_state(n.job);
            if (!j || j->phase != JobPhase::running) {
                NodeExit ex{
                    NodeLostError::Reason::unreachable,
                    fmt::format("the Slurm job {} is no longer known to the cluster", n.job)};
                if (j) ex = {loss_kind(*j), end_words(*j)};
                std::lock_guard lk(m_);
                // A job its user or an administrator cancelled stays ended: the pool does not
                // submit another behind their back. Time limits, node failures and preemption
                // are the scheduler's doing: a new job may replace the nodes.
                ended_[n.job] = !(j && j->state == "CANCELLED");
                return ex;
            }
            // The job runs: the worker's step ended. Its launcher's last words are in the
            // srun output on the login node.
            auto r = login_->script(
                fmt::format("tail -n 40 {} 2>/dev/null", shell_quote(out_file(i, n.generation))),
                kCommandLimit);
            std::string code;
            std::vector<std::string> before;
            for (const auto& l : lines_of(r.out)) {
                if (const auto v = node::marks::exit.value_in(l))
                    code = std::string(*v);
                else if (!node::is_mark(l))
                    before.push_back(l);
            }
            const std::string where = fmt::format("node {} of job {}", n.name, n.job);
            if (code.empty())
                return {NodeLostError::Reason::unreachable,
                        fmt::format("the channel to the worker on {} closed", where)};
            const int status = std::atoi(code.c_str());
            std::string detail =
                status > 128 ? fmt::format("the worker on {} was killed by signal {} ({})", where,
                                           status - 128, strsignal(status - 128))
                             : fmt::format("the worker on {} exited with status {}", where, status);
            if (status != 0 && !before.empty()) detail += "; its last output: " + before.back();
            // A crash's report is in the worker's files on the node, which its launcher keeps
            // until they are read (`status`, through the node's bring-up).
            std::optional<WorkerCrash> crash;
            if (status > 128) crash = node_crash(i, n);
            return {status == 0 ? NodeLostError::Reason::unreachable
                                : NodeLostError::Reason::worker_crashed,
                    detail, std::move(crash)};
        } catch (const std::exception& e) {
            return {NodeLostError::Reason::unreachable, e.what()};
        }
    }

    // The crash report of node i's last worker, read on the node; nullopt when it left none.
    std::optional<WorkerCrash> node_crash(int i, const Node& n) {
        NodeBringUp* up = nullptr;
        {
            std::lock_guard lk(m_);
            const auto u = ups_.find(i);
            if (u != ups_.end() && u->second.job == n.job) up = u->second.up.get();
        }
        if (!up) return std::nullopt;
        return up->exit_reason().crash;
    }

    bool can_restart(int i) const override {
        // A fresh worker step in the job's allocation while the job runs; a node of a new job
        // when Slurm ended it (connect() submits one), unless it was cancelled on purpose.
        std::lock_guard lk(m_);
        const auto e = ended_.find(nodes_.at(static_cast<std::size_t>(i)).job);
        return !stopping_ && login_ && login_->alive() && (e == ended_.end() || e->second);
    }

    void begin_stop() noexcept override { stopping_ = true; }

    void stop_all() noexcept override {
        std::unique_lock stop_lk(stop_m_);
        if (stopped_) return;
        stopped_ = true;
        stopping_ = true;
        if (!submitted_) {
            if (login_) login_->close();
            return;
        }
        std::string ids;
        {
            std::lock_guard lk(m_);
            ids = fmt::format("{}", fmt::join(jobs_, ","));
        }
        std::string trouble;
        std::unique_ptr<node::NodeShell> fresh;
        try {
            node::NodeShell* login = login_.get();
            if (!login || !login->alive()) {
                // The connection died (a cut link, a restarted sshd): one new one to end the job.
                fresh = open_login(login_options());
                login = fresh.get();
            }
            // By name: every job of the pool (a replacement too, even one whose sbatch answer
            // was lost).
            trouble = cancel_job(*login, "", job_name_);
            const auto left = wait_gone(*login, "", job_name_, kCancelLimit);
            if (left)
                trouble = fmt::format("job {} is still {} after {} s", left->id, left->state,
                                      kCancelLimit.count());
            else
                trouble.clear();
            // The pool's files on the login node (srun outputs, the watchdog); each node's
            // launcher removed its own run directory when its worker ended.
            remove_pool_files(*login, pool_id_);
        } catch (const std::exception& e) {
            if (trouble.empty()) trouble = e.what();
        }
        if (fresh) fresh->close();
        if (!trouble.empty()) {
            leftovers_.push_back(
                fmt::format("slurm job {} of pool {} on {}: {}", ids.empty() ? job_name_ : ids,
                            pool_id_, cfg_.login.empty() ? "this machine" : cfg_.login, trouble));
        } else if (ledger_) {
            for (const auto& r : recorded_) ledger_->instance_gone(r);
        }
        if (login_) login_->close();
    }

    std::vector<std::string> leftovers() const override { return leftovers_; }

private:
    // A node of a new job in place of node i, whose job `ended` ended. The first lost node of
    // that job submits one job for all the pool's nodes it held (they all went with it); the
    // others take the rest of its nodes. Throws (and cancels the new job) when it cannot run.
    Node replacement(int i, const std::string& ended, const std::function<void(Event)>& emit) {
        std::lock_guard rl(replace_m_);
        if (stopping_) throw ProvisionError("slurm: the pool is closing; no replacement job");
        auto& spare = spares_[ended];
        if (!spare.count(i)) {
            // The pool's nodes the job held, in order: they take the new job's nodes in order
            // (the head stays the first node of a job).
            std::vector<int> held;
            {
                std::lock_guard lk(m_);
                for (std::size_t k = 0; k < nodes_.size(); ++k)
                    if (nodes_[k].job == ended) held.push_back(static_cast<int>(k));
            }
            const int count = static_cast<int>(held.size());
            // What it asks for is what is left of the pool's time (Slurm counts whole minutes).
            const auto left =
                std::chrono::duration_cast<seconds>(spec_.timeout - (Clock::now() - started_at_));
            if (left.count() <= 0)
                throw ProvisionError(fmt::format(
                    "slurm: job {} ended after the pool's timeout of {} s; no replacement job",
                    ended, spec_.timeout.count()));
            // A job that is not quite gone (suspended, completing) gives its nodes back first.
            (void)cancel_job(*login_, ended, job_name_);
            const std::string job =
                submit(count, left, fmt::format("to replace job {}, which ended", ended), emit);
            try {
                const JobState running = wait_running(job, emit);
                auto placed = place_nodes(job, running, count, emit);
                spare.clear();
                for (std::size_t k = 0; k < held.size(); ++k) spare[held[k]] = std::move(placed[k]);
            } catch (...) {
                // The pool may ask again (another attempt submits anew); this job must not hold
                // nodes meanwhile.
                try {
                    (void)cancel_job(*login_, job, job_name_);
                } catch (...) {  // the pool's teardown cancels it by name
                }
                throw;
            }
        }
        Node n = std::move(spare.at(i));
        spare.erase(i);
        std::lock_guard lk(m_);
        nodes_.at(static_cast<std::size_t>(i)) = n;
        return n;
    }

    LoginOptions login_options() const {
        LoginOptions lo;
        lo.login = cfg_.login;
        lo.identity_file = absolute(cfg_.identity_file);
        lo.known_hosts = absolute(cfg_.known_hosts);
        return lo;
    }

    static std::string absolute(const std::string& path) {
        if (path.empty()) return path;
        std::error_code ec;
        auto p = std::filesystem::absolute(path, ec);
        return ec ? path : p.string();
    }

    JobRef ref(const std::string& id) const {
        JobRef r;
        r.login = cfg_.login.empty() ? std::string() : login_->describe();
        if (!cfg_.login.empty()) {
            r.identity_file = absolute(cfg_.identity_file);
            r.known_hosts = absolute(cfg_.known_hosts);
        }
        r.job_name = job_name_;
        r.job_id = id;
        return r;
    }

    void record(const JobRef& r) {
        const std::string s = r.to_string();
        if (ledger_) ledger_->instance(s);
        recorded_.push_back(s);
    }

    // The job must not outlive a client that dies without its teardown (kill -9, a crash, a
    // lost link) by more than idle_timeout: a small process on the login node
    // (scripts/watchdog.sh) watches this client's connection there (an exec channel this
    // client holds open; on the login node itself, the client's process, by pid and start
    // time) and cancels the pool's jobs (by name: a replacement job too) idle_timeout after it
    // is gone. Teardown ends it; a reconnect to the login node starts one on the new
    // connection, which ends the one before.
    void start_watchdog(node::NodeShell& login) {
        // Two nodes' reconnects may each make a connection (one dropped as half-open, then
        // another): one at a time, so that each ends the watchdog before it and one is left.
        std::lock_guard wl(watchdog_m_);
        const std::string script(scripts::watchdog_sh());
        const std::string nonce = random_hex(16);
        std::vector<std::string> argv{"bash",
                                      "-c",
                                      script,
                                      "sky-watchdog",
                                      "watch",
                                      pool_dir_,
                                      std::to_string(spec_.idle_timeout.count()),
                                      nonce};
        if (cfg_.login.empty()) {
            argv.insert(argv.end(), {"pid", std::to_string(::getpid()), own_start_time()});
        } else {
            argv.emplace_back("channel");
        }
        argv.emplace_back("--");
        for (auto& a : scancel_name_argv(job_name_, login.user())) argv.push_back(a);
        std::string trouble;
        try {
            if (cfg_.login.empty()) {
                auto r = login.script(fmt::format("setsid nohup {} > /dev/null 2>&1 < /dev/null &",
                                                  shell_command(argv)),
                                      kCommandLimit);
                if (r.status != 0) trouble = r.summary();
            } else {
                login.hold(argv);
            }
            if (trouble.empty()) {
                auto c =
                    login.run({"bash", "-c", script, "sky-watchdog", "check", pool_dir_, nonce},
                              kCommandLimit);
                if (c.status != 0) trouble = c.summary();
            }
        } catch (const ssh::SshError&) {
            throw;
        } catch (const std::exception& e) {
            trouble = e.what();
        }
        if (!trouble.empty())
            throw ProvisionError(fmt::format(
                "slurm: cannot start the pool's watchdog on {} (it cancels the job if this "
                "client dies): {}",
                login.describe(), trouble));
    }

    // Field 22 of /proc/self/stat: with the pid, what tells this process from a later one
    // that the kernel gives the same pid.
    static std::string own_start_time() {
        std::ifstream f("/proc/self/stat");
        std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::istringstream rest(stat.substr(stat.rfind(')') + 2));
        std::string field;
        for (int k = 3; k <= 22 && rest >> field; ++k) {
        }
        return field;
    }

    void check_tools(node::NodeShell& login) {
        auto r = login.script(
            "for c in sbatch squeue scancel srun sinfo scontrol sbcast; do command -v \"$c\" "
            ">/dev/null 2>&1 || printf '%s ' \"$c\"; done; echo",
            kCommandLimit);
        const std::string missing(trim(r.out));
        if (r.status != 0 || !missing.empty())
            throw ProvisionError(fmt::format(
                "slurm: {} not found on {} (on the PATH of a non-interactive shell there)",
                missing.empty() ? r.summary() : missing, login.describe()));
    }

    // The job's state; a job that is completing is given a few seconds to end, so that the
    // state says why it ended (CANCELLED, TIMEOUT, NODE_FAIL...).
    std::optional<JobState> settled_state(const std::string& job) {
        std::optional<JobState> j;
        // Up to 35 s: a job stays COMPLETING until its steps' processes are gone and the node
        // has said so, which on a busy cluster took longer than 15 s, and a process that
        // outlives SIGTERM holds it for the cluster's KillWait (30 s by default). Its final
        // state (TIMEOUT, NODE_FAIL, PREEMPTED) is what the user must read; squeue shows only
        // COMPLETING until then.
        for (int i = 0; i < 140; ++i) {
            j = query_job(*login_, job);
            if (!j || j->phase != JobPhase::completing) return j;
            std::this_thread::sleep_for(milliseconds(250));
        }
        return j;
    }

    JobState wait_running(const std::string& job, const std::function<void(Event)>& emit) {
        const std::string event_id = "slurm-job-" + job;
        const auto start = Clock::now();
        std::string last;
        auto delay = milliseconds(300);
        int unknown = 0;
        for (;;) {
            if (stopping_) throw ProvisionError("slurm: the pool was closed while its job waited");
            auto j = query_job(*login_, job);
            if (!j) {
                // Just submitted: squeue may not list it for a moment.
                if (++unknown > 10)
                    throw ProvisionError(fmt::format(
                        "slurm: job {} vanished from the queue before it started", job));
            } else if (j->phase == JobPhase::running) {
                return *j;
            } else if (j->phase == JobPhase::ended || j->phase == JobPhase::completing) {
                throw ProvisionError("slurm: " + end_words(*j) + ", before the pool could start");
            } else {
                const std::string now = fmt::format("{} {}", j->state, j->reason);
                if (now != last) {
                    last = now;
                    emit(BootstrapProgress{event_id,
                                           fmt::format("{}: {} ({})", to_lower(j->state), j->reason,
                                                       explain_reason(j->reason))});
                }
                if (j->phase == JobPhase::pending && reason_never_clears(j->reason))
                    give_up(job,
                            fmt::format("job {} cannot start: it is pending with reason {} ({})",
                                        job, j->reason, explain_reason(j->reason)));
                const auto waited = std::chrono::duration_cast<seconds>(Clock::now() - start);
                if (waited >= cfg_.queue_timeout)
                    give_up(
                        job,
                        fmt::format("job {} waited {} s in the queue{} (queue_timeout {} s), {} "
                                    "with reason {} ({})",
                                    job, waited.count(),
                                    cfg_.partition.empty() ? "" : " of partition " + cfg_.partition,
                                    cfg_.queue_timeout.count(), to_lower(j->state), j->reason,
                                    explain_reason(j->reason)));
            }
            const auto until = Clock::now() + delay;
            while (Clock::now() < until && !stopping_)
                std::this_thread::sleep_for(milliseconds(50));
            delay = std::min(delay * 2, milliseconds(3000));
        }
    }

    // Cancels the job, confirms it is gone, and fails provisioning with `why`.
    [[noreturn]] void give_up(const std::string& job, const std::string& why) {
        std::string after = "; the job was cancelled";
        try {
            const std::string e = cancel_job(*login_, job, job_name_);
            if (!e.empty())
                after = "; cancelling it failed: " + e;
            else if (auto left = wait_gone(*login_, job, job_name_, kCancelLimit))
                after = fmt::format("; cancelled, but it is still {}", left->state);
        } catch (const std::exception& e) {
            after = std::string("; cancelling it failed: ") + e.what();
        }
        throw ProvisionError("slurm: " + why + after);
    }

    // The running job's nodes: names, addresses, homes, and the program placed on each.
    std::vector<Node> place_nodes(const std::string& job, const JobState& running, int count,
                                  const std::function<void(Event)>& emit) {
        auto& login = *login_;
        const auto names = expand_hostlist(running.nodes);
        if (static_cast<int>(names.size()) != count)
            give_up(job, fmt::format("job {} runs on {} node(s) ({}), the pool asked for {}", job,
                                     names.size(), running.nodes, count));
        auto sc = login.run(scontrol_nodes_argv(names), kCommandLimit);
        std::map<std::string, NodeInfo> info;
        for (auto& n : parse_scontrol_nodes(sc.out)) info[n.name] = n;
        std::vector<Node> nodes(names.size());
        for (std::size_t k = 0; k < names.size(); ++k) {
            nodes[k].name = names[k];
            nodes[k].address = info.count(names[k]) ? info[names[k]].address : names[k];
            nodes[k].instance_id = fmt::format("slurm-{}-{}", job, names[k]);
            nodes[k].job = job;
        }
        resolve_addresses(login, nodes);

        // One step on every node: its architecture, C library, home, whether it sees the
        // login node's files (a shared home) and whether its own store has the program.
        const auto& prog = ship::this_program();
        const std::string nonce = random_hex(32);
        const std::string probe_file = pool_dir_ + "/probe";
        login.script(fmt::format("umask 077; cat > {}", shell_quote(probe_file)), kCommandLimit,
                     nonce + "\n");
        auto p = login.run(srun_argv(job, names,
                                     {"bash", "-c", std::string(scripts::probe_sh()), "sky-probe",
                                      std::string(node::marks::probe.text), probe_file, prog.id}),
                           kCommandLimit * 2);
        struct Seen {
            std::string arch, glibc, nonce, cached, home;
        };
        std::map<std::string, Seen> seen;
        for (const auto& l : lines_of(p.out)) {
            const auto facts = node::marks::probe.value_in(l);
            if (!facts) continue;
            std::istringstream is{std::string(*facts)};
            std::string name;
            Seen s;
            is >> name >> s.arch >> s.glibc >> s.nonce >> s.cached;
            std::getline(is >> std::ws, s.home);
            seen[name] = s;
        }
        utsname u{};
        ::uname(&u);
        bool shared = true, cached = true;
        for (std::size_t k = 0; k < nodes.size(); ++k) {
            auto& n = nodes[k];
            const int node = static_cast<int>(k);
            if (!seen.count(n.name))
                throw BootstrapError(node, n.instance_id, "check",
                                     fmt::format("could not run a step on {} of job {}: {}", n.name,
                                                 job, p.summary()),
                                     last_lines(p));
            const Seen& s = seen[n.name];
            if (s.arch != u.machine)
                throw BootstrapError(node, n.instance_id, "check",
                                     fmt::format("{} is {} but this program is built for {}",
                                                 n.name, s.arch, u.machine));
            const auto dot = s.glibc.find('.');
            ship::GlibcVersion have{
                std::atoi(s.glibc.c_str()),
                dot == std::string::npos ? 0 : std::atoi(s.glibc.c_str() + dot + 1)};
            if (s.glibc == "-" || have < prog.glibc)
                throw BootstrapError(
                    node, n.instance_id, "check",
                    fmt::format("{}'s C library is glibc {}, but this program needs glibc {}.{} "
                                "or newer",
                                n.name, s.glibc, prog.glibc.major, prog.glibc.minor));
            n.home = s.home;
            shared = shared && s.nonce == nonce;
            cached = cached && s.cached == "cached";
        }
        login.script(fmt::format("rm -f {}", shell_quote(probe_file)), kCommandLimit);
        if (shared) {
            placement_ = "on the cluster's shared file system (" + prog_on_login_ + ")";
            for (auto& n : nodes) n.prog = prog_on_login_;
        } else {
            if (!cached) broadcast_program(job, names, nodes, emit);
            placement_ = cached ? "cached in each node's store" : "copied to each node by sbcast";
            for (auto& n : nodes) n.prog = ship::program_dir(n.home, prog);
        }
        return nodes;
    }

    // Names that are not IPv4 addresses, resolved as the login node resolves them (the worker
    // listens on, and the peers dial, an address).
    void resolve_addresses(node::NodeShell& login, std::vector<Node>& nodes) {
        std::string names;
        for (const auto& n : nodes)
            if (!is_ipv4(n.address)) names += " " + shell_quote(n.address);
        if (names.empty()) return;
        auto r = login.script(
            "for h in" + names +
                "; do echo \"$h $(getent ahostsv4 \"$h\" | awk 'NR==1{print $1}')\"; done",
            kCommandLimit);
        std::map<std::string, std::string> ip;
        for (const auto& l : lines_of(r.out)) {
            std::istringstream is(l);
            std::string h, a;
            is >> h >> a;
            if (is_ipv4(a)) ip[h] = a;
        }
        for (std::size_t k = 0; k < nodes.size(); ++k) {
            auto& n = nodes[k];
            if (is_ipv4(n.address)) continue;
            if (!ip.count(n.address))
                throw BootstrapError(static_cast<int>(k), n.instance_id, "check",
                                     fmt::format("the login node cannot resolve {}'s address {}",
                                                 n.name, n.address));
            n.address = ip[n.address];
        }
    }

    // Nodes that see neither the login node's files nor the program in their own store get it
    // by sbcast: one archive of the program's directory, into a private directory of the pool
    // on each node (made first, mode 0700, its random name on the step's stdin: no other user
    // of a node can create or replace what sbcast writes), then unpacked into each node's store
    // from a private copy whose SHA-256 is the login node's archive's (scripts/incoming.sh,
    // scripts/unpack.sh).
    void broadcast_program(const std::string& job, const std::vector<std::string>& names,
                           const std::vector<Node>& nodes, const std::function<void(Event)>& emit) {
        auto& login = *login_;
        const auto& prog = ship::this_program();
        const std::string tar = pool_dir_ + "/program.tar";
        const std::string incoming = fmt::format("/tmp/sky-{}-{}", pool_id_, random_hex(16));
        for (const auto& n : nodes)
            emit(BootstrapProgress{n.instance_id, "sbcast", 0, prog.total_bytes()});
        auto t = login.script(fmt::format("umask 077; tar -C {0} -cf {1} . && sha256sum < {1}",
                                          shell_quote(prog_on_login_), shell_quote(tar)),
                              seconds(300));
        auto fail = [&](const std::string& what, const node::CommandOutcome& r) {
            throw BootstrapError(0, nodes.front().instance_id, "upload",
                                 fmt::format("{}: {}", what, r.summary()), last_lines(r));
        };
        const std::string sum = t.out.substr(0, std::min<std::size_t>(t.out.size(), 64));
        if (t.status != 0 || sum.size() != 64 ||
            sum.find_first_not_of("0123456789abcdef") != std::string::npos)
            fail("cannot archive the program on the login node", t);
        const auto each_node = [&](const node::CommandOutcome& r, const node::Mark& mark,
                                   const std::string& what) {
            for (std::size_t k = 0; k < nodes.size(); ++k) {
                if (r.out.find(mark.line(nodes[k].name) + "\n") != std::string::npos) continue;
                std::string why = r.summary();
                for (const auto& l : lines_of(r.out))
                    if (auto v = node::marks::refused.value_in(l);
                        v && v->rfind(nodes[k].name + " ", 0) == 0)
                        why = std::string(v->substr(nodes[k].name.size() + 1));
                throw BootstrapError(static_cast<int>(k), nodes[k].instance_id, "upload",
                                     fmt::format("{} {}: {}", what, nodes[k].name, why),
                                     last_lines(r));
            }
        };
        auto d =
            login.run(srun_argv(job, names,
                                {"bash", "-c", with_marks(scripts::incoming_sh()), "sky-incoming"}),
                      kCommandLimit, incoming + "\n");
        each_node(d, node::marks::incoming, "cannot make the pool's private directory on");
        auto b = login.run(sbcast_argv(job, tar, incoming + "/program.tar"), seconds(600));
        if (b.status != 0) {
            // The private directories go with the failure (unpack.sh removes them otherwise).
            (void)login.run(srun_argv(job, names, {"rm", "-rf", "--", incoming}), kCommandLimit);
            fail("sbcast could not copy the program to the job's nodes", b);
        }
        auto u = login.run(srun_argv(job, names,
                                     {"bash", "-c", with_marks(scripts::unpack_sh()), "sky-unpack",
                                      incoming, prog.id, sum}),
                           seconds(300));
        login.script(fmt::format("rm -f {}", shell_quote(tar)), kCommandLimit);
        each_node(u, node::marks::placed, "the program did not arrive on");
        for (const auto& n : nodes)
            emit(
                BootstrapProgress{n.instance_id, "sbcast", prog.total_bytes(), prog.total_bytes()});
    }

    // Node i's bring-up (providers/remote/bring_up.hpp) over its srun shell: the program is
    // placed already (place_nodes); the image's bootstrap and the worker's launcher run as steps
    // of the job on the node.
    NodeBringUp& bring_up(int i, const Node& n) {
        std::lock_guard lk(m_);
        auto& u = ups_[i];
        if (!u.up || u.job != n.job) {
            u.job = n.job;
            u.up.reset();
            u.shell = std::make_unique<SrunShell>(*login_, n.job, n.name, n.home);
            BringUpOptions o;
            o.instance_id = n.instance_id;
            o.program_dir = n.prog;
            // Nodes that share a home take turns at the image (one builds it, the others find
            // it made).
            o.shared_home = true;
            o.listen_host = n.address;
            // The client's connection comes from the login node, from the address srun reached
            // the node from: the worker accepts no other peer of the cluster's network.
            o.allow_from_variable = "SLURM_LAUNCH_NODE_IPADDR";
            // At least 30 s for the client's first connection: its channel comes through the
            // login node after the step starts, which on a busy client took over a 5 s
            // idle_timeout.
            o.min_accept_timeout = seconds(30);
            // Silent for idle_timeout: the pool's client is gone, the job is released; unless
            // the pool gave up on this worker and started a fresh step on the node, which it
            // does within a few seconds of the worker's idle end (kSupersededGrace).
            o.release_on_idle = {"scancel", n.job};
            o.superseded_grace = kSupersededGrace;
            o.worker_dir_per_launch = true;
            // The login node -> compute node hop is the cluster network, and srun's stdin and
            // output cross it in clear: only public keys go there, the stream is sealed.
            o.seal = true;
            // The job's --signal reaches the launcher's step ahead of its end: a notice
            // (api.md §10a). Slurm ends the step itself, so the notice's deadline is the
            // earliest it may come, and sky ends nothing early.
            if (auto l = leads_.find(n.job); l != leads_.end()) {
                o.notice_signal = SIGUSR1;
                o.notice_lead = l->second;
                o.notice_reason = fmt::format(
                    "slurm: job {} ends in {} s or a little later (its time limit, or a "
                    "preemption; --signal={}@{})",
                    n.job, l->second.count(), notice_signal_name, l->second.count());
            }
            o.start_launcher = [this, i](const std::vector<std::string>& argv,
                                         const std::string& settings) {
                return start_step(i, argv, settings);
            };
            u.up = std::make_unique<NodeBringUp>(*u.shell, spec_, pool_id_, i, std::move(o));
        }
        return *u.up;
    }

    // The image's bootstrap script (Image::bootstrap: env, python, pip, files, setup...), phase
    // by phase; its results (env.sh, a venv) stay in the node's ~/.sky/image-<hash>.
    void bootstrap_image(int i, const Node& n, const std::function<void(Event)>& emit) {
        auto& up = bring_up(i, n);
        up.check(emit);
        up.ship(emit);
        up.bootstrap(emit);
    }

    std::string out_file(int i, int generation) const {
        return fmt::format("{}/node-{}-{}.out", pool_dir_, i, generation);
    }

    // Starts the launcher's argv as a step of the job on node i (srun --overlap, detached on the
    // login node: the worker does not depend on this client's connection). The step's launcher
    // stays in the step (no double fork): Slurm's signals reach it and its worker. Its settings
    // (with the token) go on its stdin, from a file opened and removed before srun starts;
    // returns the step's first lines up to the port mark (from its output file on the login
    // node).
    node::CommandOutcome start_step(int i, const std::vector<std::string>& argv,
                                    const std::string& settings) {
        Node n;
        {
            std::lock_guard lk(m_);
            n = nodes_.at(static_cast<std::size_t>(i));
        }
        const std::string out = out_file(i, n.generation);
        const std::string pid = fmt::format("{}/node-{}.srun-pid", pool_dir_, i);
        std::vector<std::string> step{"bash",
                                      "-c",
                                      std::string(scripts::step_sh()),
                                      "sky-step",
                                      pool_dir_,
                                      fmt::format("node-{}.in", i),
                                      out,
                                      pid,
                                      std::string(node::marks::port.text),
                                      std::string(node::marks::exit.text),
                                      "--"};
        for (auto& w : srun_argv(n.job, {n.name}, argv)) step.push_back(std::move(w));
        return login_->run(step, seconds(90), settings);
    }

    // Starts node i's worker as a step of the job and returns the port it listens on.
    std::uint16_t start_worker(int i, Node& n) {
        ++n.generation;
        {
            std::lock_guard lk(m_);
            nodes_.at(static_cast<std::size_t>(i)).generation = n.generation;
        }
        auto& up = bring_up(i, n);
        up.launch([](Event) {});
        n.token = up.token();
        return up.port();
    }

    PoolSpec spec_;
    Slurm cfg_;
    std::string pool_id_;
    std::string job_name_;
    Ledger* ledger_ = nullptr;
    std::string instance_type_;
    std::string event_id_;  // events before a job exists; each job's are "slurm-job-<id>"

    mutable std::mutex m_;
    std::mutex watchdog_m_;  // start_watchdog, one at a time
    std::unique_ptr<node::NodeShell> login_;
    // Each node's bring-up over its srun shell, for the job that holds the node now.
    struct NodeUp {
        std::string job;
        std::unique_ptr<SrunShell> shell;
        std::unique_ptr<NodeBringUp> up;
    };
    std::map<int, NodeUp> ups_;
    std::vector<std::string> jobs_;                      // every job submitted, in order
    std::map<std::string, std::chrono::seconds> leads_;  // each job's --signal lead, by id
    std::vector<Node> nodes_;
    // Jobs whose nodes were lost because the job ended: whether a new job may replace them
    // (false for a job cancelled by its user or an administrator).
    std::map<std::string, bool> ended_;
    BatchRequest request_;  // what the pool's first job asked for
    Clock::time_point started_at_{};
    // Replacement jobs: one at a time; the nodes of a new job that no lost node has taken yet,
    // by the ended job they replace and the pool's node each is for.
    std::mutex replace_m_;
    std::map<std::string, std::map<int, Node>> spares_;
    std::string pool_dir_;               // the pool's private directory on the login node
    std::string prog_on_login_;          // the program's directory in the login node's store
    std::string placement_;              // how the program reached the nodes, for events
    std::vector<std::string> recorded_;  // ledger ids
    std::vector<std::string> leftovers_;
    std::atomic<bool> submitted_{false};
    std::atomic<bool> stopping_{false};
    std::mutex stop_m_;
    bool stopped_ = false;
};

}  // namespace

ProviderDescriptor slurm_provider() {
    ProviderDescriptor d({
        // The ranks' services listen on every interface of the job's nodes, which sky neither
        // owns nor fences: other jobs' users share them unless the job has them to itself.
        .exposure =
            [](const PoolSpec&) {
                return Exposure::open_to_others(fmt::format(
                    "this distributed call runs on the Slurm job's nodes, where sky opens and "
                    "closes no port: {}: every other user of those nodes (unless the job has them "
                    "to itself, as with sbatch --exclusive), and anyone who can reach them on the "
                    "cluster's network, can (docs/distributed.md)",
                    rendezvous_services));
            },
        .billing = BillingPolicy{},  // the cluster's accounting, not sky's: its hourly rate is 0
        .runs_on_this_machine = false,
    });
    d.validate = [](const PoolSpec& spec, std::vector<std::string>& problems) {
        const Slurm* s = spec.provider.get<Slurm>();
        if (!s) return;
        if (spec.autoscale.max > 0)
            problems.push_back(
                "autoscale: a sky::Slurm pool is one job of a fixed size (its nodes are the "
                "job's allocation), so it cannot grow or shrink; leave autoscale at {}");
        if (!s->login.empty()) {
            try {
                (void)parse_login(s->login);
            } catch (const ConfigError& e) {
                problems.emplace_back(std::string("provider: ") + e.what());
            }
        }
        if (s->queue_timeout.count() <= 0)
            problems.push_back(
                fmt::format("provider: sky::Slurm queue_timeout must be positive, got {} s",
                            s->queue_timeout.count()));
        if (!spec.volumes.empty())
            problems.push_back(
                "volumes: sky::Slurm pools mount no volumes in this build (use the cluster's "
                "shared file systems)");
        if (spec.machine)
            problems.push_back(
                "machine: a Slurm cluster has no machine types; use sky::Slurm's partition or "
                "constraint");
        for (const auto* v : {&s->partition, &s->account, &s->qos, &s->constraint, &s->reservation})
            if (v->find_first_of("\n\r") != std::string::npos)
                problems.push_back("provider: a sky::Slurm option holds a line break");
    };
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return std::make_unique<SlurmBackend>(c.spec, c.pool_id, c.ledger);
    };
    // `sky ls` and `sky gc` reach Slurm as they reach a cloud: its machine inventory lists sky's
    // jobs (squeue by name) and scancels those of dead pools.
    add_cloud_gc(d, [](std::string_view) { return make_slurm_inventory(); });
    return d;
}

}  // namespace sky::detail
