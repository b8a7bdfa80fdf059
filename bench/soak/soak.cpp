// bench/soak: sky::SSH under churn (scripts/soak.sh; needs root for the test hosts).
//
// A pool over 4 test hosts (network namespaces with a real sshd) serves random work from three
// client threads: gathers of random sizes with .retries(), `>>` of payloads up to 4 MiB, `|`,
// `&`, submit + cancel, calls that throw, long calls with and without .timeout(). Meanwhile a
// chaos thread SIGKILLs a host's worker, kills a host's sshd and starts it again, or takes a
// host's link down and up again. A pool that has lost half its nodes for good (sky::SSH replaces
// a node only while its host answers, at most 3 times) or is 4 minutes old is replaced.
//
// Every call must end in a checked value or a typed sky::Error within its bound; a wrong value,
// an exception that is not a sky::Error, a call past its bound or one that never ends is a
// failure. Every 10 s a row: the client's RSS, open fds and threads. Between two pools (every
// host restored, no pool, free heap handed back with malloc_trim) the fds and threads must be
// back at the baseline taken after a warm-up pool, and the highest idle RSS of the last third of
// the run within kRssBoundMiB of the highest of the first third.
//
// Usage: soak [minutes]   (else SKY_SOAK_MINUTES, else 30; SKY_SOAK_SEED fixes the dice)
// Exit status: 0 flat and nothing lost, 1 a failed call or growth, 2 cannot run here.
#include <dirent.h>
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <sky/sky.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hosts/test_hosts.hpp"

namespace soak {

int add(int a, int b) { return a + b; }
int node_index() { return sky::instance_info().node; }
int sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
}
int fail(int x) { throw std::out_of_range("soak failure " + std::to_string(x)); }
std::vector<float> echo(std::vector<float> v) { return v; }
std::string tag(std::string s, int n) { return s + ":" + std::to_string(n); }

}  // namespace soak

namespace {

using Clock = std::chrono::steady_clock;
using sky::test::TestHosts;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kHosts = 4;
constexpr int kClientThreads = 3;
// The highest idle RSS of the run's last third may exceed that of its first third by this much.
// malloc_trim runs before each idle sample, so freed memory is not counted; what remains is kept
// by glibc's per-thread arenas and sky's buffer cache, which fill in the first minutes.
constexpr double kRssBoundMiB = 16.0;
// A call without .timeout() on a host whose link is cut ends when the pool declares the node
// silent (4 heartbeats + 5 s = 25 s with idle_timeout 20 s); a replacement connect is bounded by
// its own 30 s steps, and .retries() re-runs the call elsewhere. 150 s covers two such rounds.
constexpr seconds kBound{150};
constexpr seconds kIdleTimeout{20};
// How late past its .timeout() a call may end (the supervisor checks deadlines as they come).
constexpr seconds kTimeoutSlack{10};
constexpr seconds kPoolMaxAge{240};

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct ProcStats {
    double rss_mib = 0;
    int fds = 0;
    int threads = 0;
};

ProcStats proc_stats() {
    ProcStats s;
    std::ifstream st("/proc/self/status");
    for (std::string line; std::getline(st, line);) {
        if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::stod(line.substr(6)) / 1024.0;
        if (line.rfind("Threads:", 0) == 0) s.threads = std::stoi(line.substr(8));
    }
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') ++s.fds;
        ::closedir(d);
        --s.fds;  // the directory stream itself
    }
    return s;
}

// What an exception is, as the summary counts it; empty when it is not a sky::Error.
std::string typed_name(const std::exception_ptr& e, std::string* what) {
    try {
        std::rethrow_exception(e);
    } catch (const sky::RemoteError& x) {
        *what = x.what();
        return "RemoteError";
    } catch (const sky::NodeLostError& x) {
        *what = x.what();
        return std::string("NodeLostError(") + sky::NodeLostError::reason_name(x.reason()) + ")";
    } catch (const sky::TimeoutError& x) {
        *what = x.what();
        return "TimeoutError";
    } catch (const sky::CancelledError& x) {
        *what = x.what();
        return "CancelledError";
    } catch (const sky::ProtocolError& x) {
        *what = x.what();
        return "ProtocolError";
    } catch (const sky::BootstrapError& x) {
        *what = x.what();
        return "BootstrapError(" + x.phase() + ")";
    } catch (const sky::ProvisionError& x) {
        *what = x.what();
        return "ProvisionError";
    } catch (const sky::ConfigError& x) {
        *what = x.what();
        return "ConfigError";
    } catch (const sky::Error& x) {
        *what = x.what();
        return "sky::Error";
    } catch (const std::exception& x) {
        *what = std::string("untyped ") + typeid(x).name() + ": " + x.what();
    } catch (...) {
        *what = "untyped: not a std::exception";
    }
    return {};
}

// Every call: when it began, its bound, and how it ended.
class Ledger {
public:
    std::uint64_t begin(std::string what, Clock::duration bound) {
        std::lock_guard lk(m_);
        auto id = ++next_;
        inflight_[id] = {std::move(what), Clock::now(), bound, false};
        ++calls_;
        return id;
    }
    void result(std::uint64_t id, std::size_t items) { end(id, "", {}, items); }
    void typed(std::uint64_t id, const std::string& type) { end(id, type, {}, 0); }
    void failure(std::uint64_t id, const std::string& why) { end(id, {}, why, 0); }

    // Calls past their bound that are still running (each reported once).
    std::vector<std::string> newly_overdue() {
        std::lock_guard lk(m_);
        std::vector<std::string> out;
        auto now = Clock::now();
        for (auto& [id, c] : inflight_)
            if (!c.reported && now - c.start > c.bound) {
                c.reported = true;
                out.push_back(c.what + " running for " + std::to_string(secs(now - c.start)) +
                              " s");
            }
        return out;
    }

    struct Totals {
        long calls = 0, results = 0, items = 0, typed = 0, failed = 0, late = 0, inflight = 0;
        std::map<std::string, long> by_type;
        std::vector<std::string> failures;
    };
    Totals totals() const {
        std::lock_guard lk(m_);
        return {
            calls_,   results_, items_, typed_, failed_, late_, static_cast<long>(inflight_.size()),
            by_type_, failures_};
    }
    std::vector<std::string> still_running() const {
        std::lock_guard lk(m_);
        std::vector<std::string> out;
        for (auto& [id, c] : inflight_)
            out.push_back(c.what + " since " + std::to_string(secs(Clock::now() - c.start)) + " s");
        return out;
    }

private:
    struct Call {
        std::string what;
        Clock::time_point start;
        Clock::duration bound;
        bool reported;
    };
    void end(std::uint64_t id, const std::string& type, const std::string& why, std::size_t items) {
        std::lock_guard lk(m_);
        auto it = inflight_.find(id);
        if (it == inflight_.end()) return;
        auto took = Clock::now() - it->second.start;
        if (took > it->second.bound) {
            ++late_;
            note(it->second.what + " ended after " + std::to_string(secs(took)) +
                 " s, past its bound");
        }
        if (!why.empty()) {
            ++failed_;
            note(it->second.what + ": " + why);
        } else if (!type.empty()) {
            ++typed_;
            ++by_type_[type];
        } else {
            ++results_;
            items_ += static_cast<long>(items);
        }
        inflight_.erase(it);
    }
    void note(std::string s) {
        std::fprintf(stderr, "FAILURE: %s\n", s.c_str());
        if (failures_.size() < 20) failures_.push_back(std::move(s));
    }

    mutable std::mutex m_;
    std::uint64_t next_ = 0;
    std::map<std::uint64_t, Call> inflight_;
    long calls_ = 0, results_ = 0, items_ = 0, typed_ = 0, failed_ = 0, late_ = 0;
    std::map<std::string, long> by_type_;
    std::vector<std::string> failures_;
};

// Runs one call: `body` returns an empty string when the value is right, else what is wrong.
// A RemoteError is right only when `expect_remote` is the message the function throws.
template <class F>
void record(Ledger& ledger, std::string what, Clock::duration bound, F&& body,
            std::size_t items = 1, const std::string& expect_remote = {}) {
    auto id = ledger.begin(what, bound);
    try {
        std::string wrong = body();
        if (wrong.empty())
            ledger.result(id, items);
        else
            ledger.failure(id, "wrong value: " + wrong);
    } catch (const sky::RemoteError& e) {
        if (!expect_remote.empty() && e.type_name() == "std::out_of_range" &&
            e.message() == expect_remote)
            ledger.typed(id, "RemoteError (the function threw)");
        else
            ledger.failure(id, std::string("unexpected RemoteError: ") + e.what());
    } catch (...) {
        std::string detail;
        auto type = typed_name(std::current_exception(), &detail);
        if (type.empty())
            ledger.failure(id, detail);
        else
            ledger.typed(id, type);
    }
}

// The pool the client threads use; the chaos thread replaces it while they are held off.
struct Shared {
    std::shared_timed_mutex m;
    std::unique_ptr<sky::ComputePool> pool;
    std::atomic<bool> hold{false};
    std::atomic<bool> stop{false};
};

void client_loop(Shared& sh, Ledger& ledger, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<sky::Future<int>> abandoned;  // futures that never finished (kept, not waited on)
    while (!sh.stop) {
        if (sh.hold) {
            std::this_thread::sleep_for(milliseconds(50));
            continue;
        }
        std::shared_lock lk(sh.m);
        if (!sh.pool) {
            lk.unlock();
            std::this_thread::sleep_for(milliseconds(50));
            continue;
        }
        auto& pool = *sh.pool;
        int dice = uniform(0, 99);
        int salt = uniform(0, 1 << 20);
        if (dice < 30) {
            int n = uniform(1, 400), r = uniform(0, 3);
            record(
                ledger, "gather of " + std::to_string(n) + " retries " + std::to_string(r), kBound,
                [&]() -> std::string {
                    std::vector<sky::PendingCompute<int>> calls;
                    for (int i = 0; i < n; ++i)
                        calls.push_back(sky::compute<soak::add>(i, salt).retries(r));
                    auto out = sky::gather(std::move(calls)) >> pool;
                    if (out.size() != static_cast<std::size_t>(n)) return "wrong size";
                    for (int i = 0; i < n; ++i)
                        if (out[static_cast<std::size_t>(i)] != i + salt)
                            return "item " + std::to_string(i);
                    return {};
                },
                static_cast<std::size_t>(n));
        } else if (dice < 50) {
            static constexpr std::size_t sizes[] = {0, 1, 1000, 65536, 1 << 20};
            std::vector<float> v(sizes[uniform(0, 4)]);
            for (auto& x : v) x = static_cast<float>(uniform(-1000, 1000));
            record(ledger, "echo >> of " + std::to_string(v.size()) + " floats", kBound,
                   [&]() -> std::string {
                       return (sky::compute<soak::echo>(v).retries(1) >> pool) == v
                                  ? ""
                                  : "echo differs";
                   });
        } else if (dice < 58) {
            record(ledger, "broadcast |", kBound, [&]() -> std::string {
                auto nodes = sky::compute<soak::node_index>() | pool;
                if (nodes.size() != kHosts) return std::to_string(nodes.size()) + " results";
                for (int i = 0; i < kHosts; ++i)
                    if (nodes[static_cast<std::size_t>(i)] != i) return "node order";
                return {};
            });
        } else if (dice < 68) {
            record(ledger, "batch &", kBound, [&]() -> std::string {
                auto [a, b] = (sky::compute<soak::add>(salt, 1) &
                               sky::compute<soak::tag>(std::string("t"), salt)) >>
                              pool;
                return a == salt + 1 && b == "t:" + std::to_string(salt) ? "" : "batch values";
            });
        } else if (dice < 78) {
            int ms = uniform(200, 3000), wait = uniform(0, 1000);
            record(ledger, "submit + cancel", kBound + milliseconds(ms), [&]() -> std::string {
                auto f = pool.submit(sky::compute<soak::sleep_ms>(ms));
                std::this_thread::sleep_for(milliseconds(wait));
                f.cancel();
                if (!f.wait_for(kBound + milliseconds(ms))) {
                    abandoned.push_back(std::move(f));
                    throw std::runtime_error("a cancelled call never finished");
                }
                return f.get() == ms ? "" : "sleep value";
            });
        } else if (dice < 88) {
            std::string msg = "soak failure " + std::to_string(salt);
            record(
                ledger, "a call that throws", kBound,
                [&]() -> std::string {
                    sky::compute<soak::fail>(salt) >> pool;
                    return "no exception";
                },
                1, msg);
        } else if (dice < 92) {
            int ms = uniform(3000, 20000);
            bool timed = uniform(0, 1) == 1;
            int limit = uniform(2000, 25000);
            record(ledger,
                   "long call " + std::to_string(ms) + " ms" +
                       (timed ? " timeout " + std::to_string(limit) + " ms" : ""),
                   // A call with .timeout() ends by then, whatever happens to its node.
                   timed ? milliseconds(limit) + kTimeoutSlack : kBound + milliseconds(ms),
                   [&]() -> std::string {
                       auto p = sky::compute<soak::sleep_ms>(ms);
                       int got = timed ? (p.timeout(milliseconds(limit)) >> pool) : (p >> pool);
                       // A result after its timeout is wrong; 1 s of slack either way.
                       if (timed && limit + 1000 < ms) return "a result past its timeout";
                       return got == ms ? "" : "sleep value";
                   });
        } else {
            int n = uniform(1, 50);
            record(
                ledger, "submit of a gather of " + std::to_string(n), kBound,
                [&]() -> std::string {
                    std::vector<sky::PendingCompute<int>> calls;
                    for (int i = 0; i < n; ++i)
                        calls.push_back(sky::compute<soak::add>(i, -salt).retries(2));
                    auto f = pool.submit(sky::gather(std::move(calls)));
                    if (!f.wait_for(kBound)) throw std::runtime_error("a gather never finished");
                    auto out = f.get();
                    for (int i = 0; i < n; ++i)
                        if (out[static_cast<std::size_t>(i)] != i - salt) return "item value";
                    return {};
                },
                static_cast<std::size_t>(n));
        }
        lk.unlock();
        std::this_thread::sleep_for(milliseconds(uniform(0, 150)));
    }
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// SIGKILLs the sky workers in host i's namespace (the pid namespace is shared by every host, so
// a pattern would hit the other hosts' workers too). Returns how many.
int kill_workers(const TestHosts& hosts, int i) {
    auto r = sky::test::run_command({"ip", "netns", "pids", hosts.netns(i)});
    std::istringstream is(r.output);
    int killed = 0;
    for (long pid; is >> pid;) {
        auto cmd = read_text("/proc/" + std::to_string(pid) + "/cmdline");
        std::replace(cmd.begin(), cmd.end(), '\0', ' ');
        if (cmd.find("/.sky/prog/") != std::string::npos &&
            cmd.find(" --sky-worker") != std::string::npos &&
            ::kill(static_cast<pid_t>(pid), SIGKILL) == 0)
            ++killed;
    }
    return killed;
}

void log_line(Clock::time_point t0, const std::string& s) {
    std::printf("  %7.1f  %s\n", secs(Clock::now() - t0), s.c_str());
    std::fflush(stdout);
}

// The chaos thread: events on random hosts, their repair, and the replacement of worn pools.
class Chaos {
public:
    Chaos(TestHosts& hosts, Shared& sh, Ledger& ledger, std::uint64_t seed, Clock::time_point t0)
        : hosts_(hosts), sh_(sh), ledger_(ledger), rng_(seed), t0_(t0), down_(kHosts) {}

    struct Idle {
        double at = 0;
        ProcStats s;
        int own_threads = 0;  // the soak's own threads running then (clients, chaos)
    };
    std::vector<Idle> idle;        // after each pool, none running
    std::vector<ProcStats> fresh;  // each new pool, every node up, no call in flight
    std::map<std::string, int> events;
    std::atomic<int> pools{0};
    std::atomic<int> replaced{0};
    std::atomic<int> live_nodes{0};
    std::atomic<int> closed_under_calls{0};  // pools closed under hung calls

    // Creates the first pool (the caller has taken the baseline).
    bool start() { return new_pool(); }

    void run(const std::atomic<bool>& done) {
        auto next = Clock::now() + seconds(uniform(10, 30));
        while (!done) {
            std::this_thread::sleep_for(milliseconds(500));
            auto now = Clock::now();
            for (int i = 0; i < kHosts; ++i)
                if (down_[static_cast<std::size_t>(i)].kind != Down::none &&
                    now >= down_[static_cast<std::size_t>(i)].until)
                    repair(i);
            if (now >= next) {
                strike();
                next = now + seconds(uniform(10, 40));
            }
            int live = 0;
            {
                // Only this thread replaces the pool: it may read it without the lock.
                live = sh_.pool ? sh_.pool->instance_count() : 0;
                live_nodes = live;
            }
            if (live <= kHosts / 2 || now - born_ > kPoolMaxAge) {
                log_line(t0_, "replacing the pool (" + std::to_string(live) + " of " +
                                  std::to_string(kHosts) + " nodes left, " +
                                  std::to_string(static_cast<int>(secs(now - born_))) + " s old)");
                if (!replace_pool()) return;
                next = Clock::now() + seconds(uniform(10, 30));
            }
        }
        for (int i = 0; i < kHosts; ++i) repair(i);
        end_pool();
    }
    bool fatal() const { return fatal_; }

    void end_pool() {
        auto lk = exclusive();
        sh_.pool.reset();
        live_nodes = 0;
        sh_.hold = false;
    }

    // Holds the clients off and waits for the calls in flight. Calls still running past their
    // bound are hung: the pool is closed under them (they end with CancelledError and count as
    // late), so that the soak can go on and measure the rest.
    std::unique_lock<std::shared_timed_mutex> exclusive() {
        sh_.hold = true;
        std::unique_lock lk(sh_.m, std::defer_lock);
        if (lk.try_lock_for(kBound)) return lk;
        ++closed_under_calls;
        log_line(t0_, "calls still running after " + std::to_string(kBound.count()) +
                          " s: closing the pool under them");
        try {
            if (sh_.pool) sh_.pool->close();
        } catch (const std::exception& e) {
            log_line(t0_, std::string("close: ") + e.what());
        }
        if (!lk.try_lock_for(seconds(60))) {
            log_line(t0_, "calls still running 60 s after the pool was closed");
            fatal_ = true;
            lk.lock();  // the summary reports them as lost when the clients never return
        }
        return lk;
    }

    // Settles (up to 30 s: threads of a closed pool may still be exiting), trims the heap, and
    // samples the client with no pool; *settled says how long it took.
    ProcStats idle_sample(const ProcStats* baseline, int own_threads, double* settled = nullptr) {
        ProcStats s;
        const auto from = Clock::now(), until = from + seconds(30);
        for (int i = 0; i < 300; ++i) {
            ::malloc_trim(0);
            s = proc_stats();
            if (!baseline ||
                (s.fds <= baseline->fds && s.threads <= baseline->threads + own_threads) ||
                Clock::now() > until)
                break;
            std::this_thread::sleep_for(milliseconds(100));
        }
        if (settled) *settled = secs(Clock::now() - from);
        return s;
    }

private:
    struct Down {
        enum Kind { none, sshd, link } kind = none;
        Clock::time_point until{};
    };
    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

    void strike() {
        int impaired = 0;
        std::vector<int> ok;
        for (int i = 0; i < kHosts; ++i) {
            if (down_[static_cast<std::size_t>(i)].kind != Down::none)
                ++impaired;
            else
                ok.push_back(i);
        }
        if (ok.empty() || impaired >= 2) return;
        int i = ok[static_cast<std::size_t>(uniform(0, static_cast<int>(ok.size()) - 1))];
        int dice = uniform(0, 99);
        auto& d = down_[static_cast<std::size_t>(i)];
        if (dice < 45) {
            int n = kill_workers(hosts_, i);
            ++events["kill worker"];
            log_line(t0_, "host " + std::to_string(i) + ": SIGKILL its worker (" +
                              std::to_string(n) + " process" + (n == 1 ? "" : "es") + ")");
        } else if (dice < 70) {
            hosts_.kill_sshd(i);
            d = {Down::sshd, Clock::now() + seconds(uniform(3, 30))};
            ++events["kill sshd"];
            log_line(t0_, "host " + std::to_string(i) + ": sshd killed");
        } else {
            hosts_.set_link_up(i, false);
            d = {Down::link, Clock::now() + seconds(uniform(3, 60))};
            ++events["cut link"];
            log_line(t0_, "host " + std::to_string(i) + ": link down");
        }
    }

    void repair(int i) {
        auto& d = down_[static_cast<std::size_t>(i)];
        try {
            if (d.kind == Down::sshd) {
                // The same host key and authorized keys: the host as the client pinned it.
                hosts_.restart_sshd(
                    i, read_text(hosts_.dir() / ("host" + std::to_string(i) + "_ed25519")),
                    read_text(hosts_.dir() / "authorized_keys"));
                log_line(t0_, "host " + std::to_string(i) + ": sshd started again");
            } else if (d.kind == Down::link) {
                hosts_.set_link_up(i, true);
                log_line(t0_, "host " + std::to_string(i) + ": link up");
            }
        } catch (const std::exception& e) {
            log_line(t0_, "host " + std::to_string(i) + ": repair failed: " + e.what());
            fatal_ = true;
        }
        d = {};
    }

    bool new_pool() {
        sky::SSH ssh;
        for (int i = 0; i < kHosts; ++i) ssh.hosts.push_back(hosts_.address(i));
        ssh.user = hosts_.user();
        ssh.port = hosts_.port(0);
        ssh.identity_file = hosts_.client_key_path().string();
        ssh.known_hosts = hosts_.known_hosts_file().string();
        sky::PoolSpec spec{.provider = ssh,
                           .nodes = kHosts,
                           .idle_timeout = kIdleTimeout,
                           .concurrency = 2,
                           .display = sky::Display::quiet};
        for (int attempt = 0; attempt < 5; ++attempt) {
            std::unique_ptr<sky::ComputePool> p;
            record(ledger_, "pool start", kBound, [&]() -> std::string {
                p = std::make_unique<sky::ComputePool>(spec);
                return p->instance_count() == kHosts ? "" : "nodes missing";
            });
            if (p) {
                p->on<sky::InstanceReplaced>([this](const sky::InstanceReplaced& r) {
                    ++replaced;
                    log_line(t0_, "pool: node " + std::to_string(r.node) + " replaced");
                });
                p->on<sky::ErrorEvent>([this](const sky::ErrorEvent& e) {
                    log_line(t0_, "pool: " + e.message.substr(0, 200));
                });
                ::malloc_trim(0);
                fresh.push_back(proc_stats());
                sh_.pool = std::move(p);
                live_nodes = kHosts;
                born_ = Clock::now();
                ++pools;
                return true;
            }
            std::this_thread::sleep_for(seconds(5));
        }
        log_line(t0_, "no pool could be started 5 times in a row");
        fatal_ = true;
        return false;
    }

    bool replace_pool() {
        for (int i = 0; i < kHosts; ++i) repair(i);
        auto lk = exclusive();
        auto t = Clock::now();
        sh_.pool.reset();
        double closed = secs(Clock::now() - t);
        double settled = 0;
        auto s = idle_sample(&idle.front().s, kClientThreads + 1, &settled);
        idle.push_back({secs(Clock::now() - t0_), s, kClientThreads + 1});
        char buf[200];
        std::snprintf(
            buf, sizeof buf,
            "pool %d closed in %.1f s; idle after %.1f s: rss %.1f MiB, %d fds, %d threads",
            pools.load(), closed, settled, s.rss_mib, s.fds, s.threads);
        log_line(t0_, buf);
        bool ok = new_pool();
        sh_.hold = false;
        return ok;
    }

    TestHosts& hosts_;
    Shared& sh_;
    Ledger& ledger_;
    std::mt19937_64 rng_;
    Clock::time_point t0_;
    std::vector<Down> down_;
    Clock::time_point born_ = Clock::now();
    std::atomic<bool> fatal_{false};
};

int run(double minutes, std::uint64_t seed) {
    TestHosts hosts(kHosts);
    Ledger ledger;
    Shared sh;
    auto t0 = Clock::now();
    Chaos chaos(hosts, sh, ledger, seed, t0);

    // Warm-up: a first pool sets up what lives as long as the process (libssh2, OpenSSL, the
    // shipped-program cache); the baseline is taken after it closed.
    std::printf("soak: %.1f min on %d test hosts, seed %llu, %d client threads\n", minutes, kHosts,
                static_cast<unsigned long long>(seed), kClientThreads);
    if (!chaos.start()) return 1;
    {
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 100; ++i) calls.push_back(sky::compute<soak::add>(i, 1));
        std::shared_lock lk(sh.m);
        sky::gather(std::move(calls)) >> *sh.pool;
        // Payloads as large as the soak's, a few at once: sky keeps a few large buffers for
        // reuse (src/runtime/buffer_cache.cpp), which belongs in the baseline.
        std::vector<sky::PendingCompute<std::vector<float>>> big;
        for (int i = 0; i < 8; ++i)
            big.push_back(sky::compute<soak::echo>(std::vector<float>(1 << 20, 1.0f)));
        sky::gather(std::move(big)) >> *sh.pool;
    }
    chaos.end_pool();
    auto base = chaos.idle_sample(nullptr, 0);
    chaos.idle.push_back({secs(Clock::now() - t0), base});
    std::printf("baseline (no pool): rss %.1f MiB, %d fds, %d threads\n", base.rss_mib, base.fds,
                base.threads);
    if (!chaos.start()) return 1;

    std::atomic<bool> done{false};
    std::thread chaos_thread([&] { chaos.run(done); });
    std::vector<std::thread> clients;
    for (int i = 0; i < kClientThreads; ++i)
        clients.emplace_back([&, i] { client_loop(sh, ledger, seed * 31 + i + 1); });

    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(minutes * 60));
    std::printf("\n%7s %5s %5s %8s %8s %6s %6s %8s %5s %7s\n", "t(s)", "pool", "nodes", "calls",
                "results", "typed", "fail", "rss MiB", "fds", "threads");
    struct Row {
        double t;
        ProcStats s;
    };
    std::vector<Row> rows;
    while (Clock::now() < end && !chaos.fatal()) {
        std::this_thread::sleep_for(std::min<Clock::duration>(seconds(10), end - Clock::now()));
        for (auto& o : ledger.newly_overdue()) std::fprintf(stderr, "OVERDUE: %s\n", o.c_str());
        auto s = proc_stats();
        auto tot = ledger.totals();
        const int live = chaos.live_nodes;
        rows.push_back({secs(Clock::now() - t0), s});
        std::printf("%7.0f %5d %5d %8ld %8ld %6ld %6ld %8.1f %5d %7d\n", rows.back().t,
                    chaos.pools.load(), live, tot.calls, tot.results, tot.typed,
                    tot.failed + tot.late, s.rss_mib, s.fds, s.threads);
        std::fflush(stdout);
    }

    // Stop: each client finishes the call it is in (bounded by that call's bound).
    sh.stop = true;
    done = true;
    auto join_by = Clock::now() + kBound + seconds(120);
    std::mutex jm;
    std::condition_variable jcv;
    int joined = 0;
    std::vector<std::thread> joiners;
    for (auto& c : clients)
        joiners.emplace_back([&, t = &c] {
            t->join();
            std::lock_guard lk(jm);
            ++joined;
            jcv.notify_all();
        });
    {
        std::unique_lock lk(jm);
        jcv.wait_until(lk, join_by, [&] { return joined == kClientThreads; });
    }
    auto tot = ledger.totals();
    if (joined != kClientThreads) {
        std::printf("\nLOST: %ld calls never ended:\n", tot.inflight);
        for (auto& s : ledger.still_running()) std::printf("  %s\n", s.c_str());
        std::fflush(stdout);
        std::_Exit(1);  // the hosts' leftovers are swept by the next TestHosts
    }
    for (auto& j : joiners) j.join();
    chaos_thread.join();
    auto last = chaos.idle_sample(&base, 0);
    chaos.idle.push_back({secs(Clock::now() - t0), last});
    tot = ledger.totals();

    double minutes_run = secs(Clock::now() - t0) / 60;
    std::printf("\nsoak: %.1f min, %d pools, %d replacements of a node,", minutes_run,
                chaos.pools.load(), chaos.replaced.load());
    for (auto& [k, v] : chaos.events) std::printf(" %s %d,", k.c_str(), v);
    std::printf(" %d pools closed under hung calls", chaos.closed_under_calls.load());
    std::printf("\n\n%-44s %8ld\n", "calls", tot.calls);
    std::printf("%-44s %8ld  (%ld items)\n", "  results, each value checked", tot.results,
                tot.items);
    std::printf("%-44s %8ld\n", "  typed errors", tot.typed);
    for (auto& [k, v] : tot.by_type) std::printf("    %-42s %8ld\n", k.c_str(), v);
    std::printf("%-44s %8ld\n", "  failures (wrong value, untyped error)", tot.failed);
    std::printf("%-44s %8ld\n", "  late (ended past their bound)", tot.late);
    std::printf("%-44s %8ld\n", "  lost (never ended)", tot.inflight);
    for (auto& f : tot.failures) std::printf("  ! %s\n", f.c_str());

    // Growth: the idle samples between pools against the baseline, and the busy rows of the
    // first minute against those of the last.
    std::printf("\nclient, idle between pools (%zu samples):\n", chaos.idle.size());
    std::printf("  %8s %8s %8s %8s %10s %8s\n", "t(s)", "rss MiB", "fds", "threads", "soak's own",
                "");
    bool flat = true;
    double max_rss = 0;
    for (auto& i : chaos.idle) {
        bool back = i.s.fds <= base.fds && i.s.threads <= base.threads + i.own_threads;
        flat = flat && back;
        max_rss = std::max(max_rss, i.s.rss_mib);
        std::printf("  %8.0f %8.1f %8d %8d %10d %8s\n", i.at, i.s.rss_mib, i.s.fds, i.s.threads,
                    i.own_threads, back ? "" : "NOT BACK");
    }
    std::printf("client, each new pool with every node up (%zu samples): fds", chaos.fresh.size());
    for (auto& f : chaos.fresh) std::printf(" %d", f.fds);
    std::printf("; threads");
    for (auto& f : chaos.fresh) std::printf(" %d", f.threads);
    std::printf("\n");
    auto busy = [&](double from, double to) {
        ProcStats avg;
        int n = 0;
        for (auto& r : rows)
            if (r.t >= from && r.t < to) {
                avg.rss_mib += r.s.rss_mib;
                avg.fds += r.s.fds;
                avg.threads += r.s.threads;
                ++n;
            }
        if (n) {
            avg.rss_mib /= n;
            avg.fds /= n;
            avg.threads /= n;
        }
        return avg;
    };
    double t_end = rows.empty() ? 0 : rows.back().t;
    auto first = busy(0, 60), final_minute = busy(t_end - 60, t_end + 1);
    std::printf("\n%-10s %12s %12s %12s %12s\n", "", "baseline", "end (idle)", "growth", "bound");
    // RSS: glibc's arenas and sky's buffer cache fill during the first minutes and vary by
    // ~20 MiB between idle samples, so the highest idle RSS of the first third of the run is
    // compared with the highest of the last third.
    const double span = chaos.idle.back().at;
    double early = 0, late = 0;
    for (std::size_t i = 1; i < chaos.idle.size(); ++i) {
        const auto& x = chaos.idle[i];
        if (x.at <= span / 3) early = std::max(early, x.s.rss_mib);
        if (x.at >= 2 * span / 3) late = std::max(late, x.s.rss_mib);
    }
    if (early == 0) early = base.rss_mib;
    const double max_growth = late - early;
    std::printf(
        "%-10s %12.1f %12.1f %12.1f %12.1f  (highest idle, first third -> last third; "
        "highest of all %.1f)\n",
        "rss MiB", early, late, max_growth, kRssBoundMiB, max_rss);
    std::printf("%-10s %12d %12d %12d %12d\n", "fds", base.fds, last.fds, last.fds - base.fds, 0);
    std::printf("%-10s %12d %12d %12d %12d\n", "threads", base.threads, last.threads,
                last.threads - base.threads, 0);
    std::printf(
        "busy, mean of the first minute -> the last: rss %.1f -> %.1f MiB, fds %d -> %d, "
        "threads %d -> %d\n",
        first.rss_mib, final_minute.rss_mib, first.fds, final_minute.fds, first.threads,
        final_minute.threads);
    bool rss_ok = max_growth <= kRssBoundMiB;
    bool calls_ok = tot.failed == 0 && tot.late == 0 && tot.inflight == 0 && !chaos.fatal();
    std::printf(
        "\nverdict: %s, %s\n", flat && rss_ok ? "flat" : "GROWTH",
        calls_ok ? "every call ended with a checked value or a typed error" : "FAILED CALLS");
    std::fflush(stdout);
    return flat && rss_ok && calls_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);  // on a host this process is the worker and never returns
    double minutes = 30;
    if (const char* m = std::getenv("SKY_SOAK_MINUTES")) minutes = std::atof(m);
    if (argc > 1) minutes = std::atof(argv[1]);
    if (!(minutes > 0)) {
        std::fprintf(stderr, "usage: soak [minutes]\n");
        return 2;
    }
    std::uint64_t seed = std::random_device{}();
    if (const char* s = std::getenv("SKY_SOAK_SEED")) seed = std::strtoull(s, nullptr, 10);
    std::string why;
    if (!TestHosts::available(&why)) {
        std::fprintf(stderr, "soak: cannot make test hosts here: %s\n", why.c_str());
        return 2;
    }
    try {
        return run(minutes, seed);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "soak: %s\n", e.what());
        return 1;
    }
}
