// `sky gc`: ends what pools that are no longer running left behind, and never touches a running
// pool's machines. A pool is no longer running when its ledger is closed or its owner process
// has ended (same pid and start time: a reused pid does not keep a dead pool alive). Machines
// tagged with a pool that has no ledger on this machine may be another client's: listed, and
// terminated only with --include-unknown.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/pools.hpp"
#include "pool/display.hpp"
#include "providers/cloud/sweep.hpp"

namespace sky::cli {

namespace {

using detail::Ledger;
using detail::LedgerRecord;
using detail::ProviderDescriptor;
using detail::terminal_safe;
using Clock = std::chrono::steady_clock;

constexpr const char* gc_usage =
    "usage: sky gc [--provider NAME] [--dry-run] [--include-unknown]\n"
    "\n"
    "Ends what pools that are no longer running left behind: their owner process has ended\n"
    "(killed, crashed, the machine rebooted) or their ledger is closed with machines left.\n"
    "A running pool's machines are never touched.\n"
    "  cloud pools   their machines (those in the ledger and those found by the pool's tag) are\n"
    "                terminated and confirmed gone, then the pool's key pair and firewall rules\n"
    "                are deleted\n"
    "  local pools   worker processes left running are killed (only a process whose command\n"
    "                line and environment prove it is that pool's worker)\n"
    "  ssh pools     nothing to terminate: the machines are yours (their workers end by their\n"
    "                idle timeout)\n"
    "Each collected pool's ledger is then marked closed; closed ledgers with nothing left are\n"
    "removed after 7 days.\n"
    "\n"
    "  --provider NAME    only pools and machines of this provider\n"
    "  --dry-run          say what would be done, change nothing\n"
    "  --include-unknown  also terminate machines tagged with a pool that has no ledger on this\n"
    "                     machine (they may belong to a client on another machine: by default\n"
    "                     they are listed and left)\n"
    "Ledgers: ~/.sky/pools (or $SKY_HOME/pools). Exit status: 0 when nothing is left to do,\n"
    "1 when something could not be ended (say why; run it again), 2 on a usage error.\n";

// How long gc waits for a cloud to confirm that terminated machines are gone.
constexpr auto kConfirmLimit = std::chrono::seconds(180);
constexpr auto kKeepClosed = std::chrono::hours(24 * 7);

// `unknown`: the cloud does not know the id. For a pool that is no longer running, asked in the
// region it ran in, that means gone (the eventual-consistency window after a launch is long
// past); asked elsewhere it means nothing.
bool is_done(const CloudInstance& i, bool unknown_is_gone) {
    return i.state == CloudInstance::State::gone ||
           (unknown_is_gone && i.state == CloudInstance::State::unknown);
}

std::string read_proc(long pid, const char* what) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/" + what, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// NUL-separated /proc lists (cmdline, environ).
std::vector<std::string> proc_list(long pid, const char* what) {
    std::vector<std::string> out;
    const std::string raw = read_proc(pid, what);
    std::size_t start = 0;
    for (std::size_t i = 0; i < raw.size(); ++i)
        if (raw[i] == '\0') {
            out.push_back(raw.substr(start, i - start));
            start = i + 1;
        }
    if (start < raw.size()) out.push_back(raw.substr(start));
    return out;
}

// Whether pid is a worker of this Local pool: its command line carries the worker flag and its
// environment the pool's id (set by the Local backend when it started the worker).
bool is_local_worker_of(long pid, const std::string& pool_id) {
    const auto argv = proc_list(pid, "cmdline");
    if (std::find(argv.begin(), argv.end(), "--sky-worker") == argv.end()) return false;
    const auto env = proc_list(pid, "environ");
    return std::find(env.begin(), env.end(), "SKY_PARENT_POOL=" + pool_id) != env.end();
}

std::optional<long> local_pid(const std::string& id) {
    if (id.rfind("local-", 0) != 0) return std::nullopt;
    const std::string n = id.substr(6);
    if (n.empty() || n.size() > 10 || !std::all_of(n.begin(), n.end(), ::isdigit))
        return std::nullopt;
    return std::stol(n);
}

struct Gc {
    std::optional<std::string> provider;
    bool dry_run = false;
    bool include_unknown = false;
    int status = 0;

    void say(const std::string& line) { std::printf("%s\n", terminal_safe(line).c_str()); }
    void fail(const std::string& line) {
        std::fprintf(stderr, "sky gc: %s\n", terminal_safe(line).c_str());
        status = 1;
    }

    static std::string describe(const LedgerRecord& r) {
        std::string owner;
        switch (r.owner()) {
            case LedgerRecord::Owner::alive:
                owner = fmt::format("owner pid {} running", r.owner_pid);
                break;
            case LedgerRecord::Owner::dead:
                owner = fmt::format("owner pid {} gone", r.owner_pid);
                break;
            case LedgerRecord::Owner::other_host:
                owner = fmt::format("owner on host {}", r.host);
                break;
            case LedgerRecord::Owner::unknown:
                owner = fmt::format("owner pid {} in another PID namespace", r.owner_pid);
                break;
        }
        return fmt::format("pool {} ({}{}{}, {}{})", r.pool_id, r.provider,
                           r.region.empty() ? "" : " ", r.region, owner,
                           r.closed ? ", ledger closed" : "");
    }

    // Records what gc established and closes the ledger; `infra_left`: what of the pool's
    // infrastructure is still there (recorded when the pool had some left, or still has).
    void close_ledger(const LedgerRecord& r, const std::vector<std::string>& gone,
                      const std::vector<std::string>& infra_left = {}) {
        if (dry_run) return;
        try {
            auto l = Ledger::attach(r.file);
            for (const auto& id : gone) l->instance_gone(id);
            if (!infra_left.empty() || !r.infra_left.empty()) l->infra_left(infra_left);
            l->close_collected();
        } catch (const std::exception& e) {
            fail(fmt::format("pool {}: cannot update its ledger: {}", r.pool_id, e.what()));
        }
        remove_key_directories(r.pool_id);
    }

    // A killed client leaves its cloud pool's 0700 key directory ("sky-<provider>-<pool id>-
    // XXXXXX" in the temporary directory, holding the pool's SSH private key): gone with the
    // pool. Only directories of this user, never through a symbolic link.
    static void remove_key_directories(const std::string& pool_id) {
        if (pool_id.size() < 8) return;
        const std::string marker = "-" + pool_id + "-";
        std::error_code ec;
        const auto tmp = std::filesystem::temp_directory_path(ec);
        if (ec) return;
        for (const auto& e : std::filesystem::directory_iterator(tmp, ec)) {
            const std::string name = e.path().filename().string();
            if (name.rfind("sky-", 0) != 0 || name.find(marker) == std::string::npos) continue;
            struct stat st {};
            if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
                st.st_uid != ::geteuid())
                continue;
            std::error_code rm;
            std::filesystem::remove_all(e.path(), rm);
        }
    }

    void collect_local(const LedgerRecord& r) {
        std::vector<long> killed;
        std::vector<std::string> gone;
        for (const auto& id : r.live_instances()) {
            const auto pid = local_pid(id);
            if (!pid || detail::process_identity(*pid).empty()) {
                gone.push_back(id);
                continue;
            }
            if (!is_local_worker_of(*pid, r.pool_id)) {
                // The pid now belongs to another process: not ours to kill.
                say(fmt::format("{}: pid {} is no longer its worker: left alone", r.pool_id, *pid));
                gone.push_back(id);
                continue;
            }
            if (dry_run) {
                say(fmt::format("{}: would kill leftover worker pid {}", describe(r), *pid));
                continue;
            }
            ::kill(static_cast<pid_t>(*pid), SIGKILL);
            killed.push_back(*pid);
            gone.push_back(id);
        }
        // SIGKILL is not refused; wait (bounded) until each has ended.
        const auto until = Clock::now() + std::chrono::seconds(10);
        for (long pid : killed)
            while (!detail::process_identity(pid).empty() && Clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
        for (long pid : killed)
            if (!detail::process_identity(pid).empty())
                fail(fmt::format("{}: worker pid {} did not end after SIGKILL", r.pool_id, pid));
        if (dry_run) {
            say(fmt::format("{}: would close its ledger", describe(r)));
            return;
        }
        say(killed.empty() ? fmt::format("{}: nothing left running; ledger closed", describe(r))
                           : fmt::format("{}: killed leftover worker(s) {}; ledger closed",
                                         describe(r), join([&] {
                                             std::vector<std::string> v;
                                             for (long p : killed)
                                                 v.push_back("pid " + std::to_string(p));
                                             return v;
                                         }())));
        close_ledger(r, gone);
    }

    void collect_ssh(const LedgerRecord& r) {
        const auto hosts = r.live_instances();
        say(
            fmt::format("{}: nothing to terminate: {} are your machines (its workers there end "
                        "by their idle timeout){}",
                        describe(r), hosts.empty() ? std::string("its hosts") : join(hosts),
                        dry_run ? "; would close its ledger" : "; ledger closed"));
        close_ledger(r, hosts);
    }

    // One pool's cloud machines to end: from its ledger (when it has one here) and its tag.
    struct CloudJob {
        const LedgerRecord* record = nullptr;  // null: a pool with no ledger here
        std::string pool_id;
        std::string label;
        bool unknown_is_gone = true;     // false: its region is not known, the cloud's answer may
                                         // come from another region
        std::vector<std::string> ids;    // to end
        std::vector<std::string> known;  // every id to record gone at the end
        bool failed = false;
    };

    void collect_cloud(const ProviderDescriptor& d, std::vector<CloudJob> jobs) {
        if (jobs.empty()) return;
        std::unique_ptr<CloudAdapter> adapter;
        try {
            adapter = make_adapter(d);
        } catch (const std::exception& e) {
            for (auto& j : jobs)
                fail(fmt::format("{}: cannot reach {}: {}", j.label, d.name, e.what()));
            return;
        }
        const std::string region = adapter->region();
        // Which recorded machines are still there (an id the cloud has forgotten is gone).
        for (auto& j : jobs) {
            if (j.record && !j.record->region.empty() && !region.empty() &&
                j.record->region != region) {
                fail(
                    fmt::format("{}: it ran in region {} but {} is set up for {}: run sky gc "
                                "with that region (e.g. AWS_REGION={})",
                                j.label, j.record->region, d.name, region, j.record->region));
                j.failed = true;
                continue;
            }
            j.unknown_is_gone = !j.record || !j.record->region.empty() || region.empty();
            std::vector<std::string> live, unknown;
            try {
                if (!j.ids.empty())
                    for (const auto& i : adapter->describe(j.ids)) {
                        if (!is_done(i, j.unknown_is_gone)) live.push_back(i.id);
                        if (i.state == CloudInstance::State::unknown) unknown.push_back(i.id);
                    }
            } catch (const std::exception& e) {
                fail(fmt::format("{}: {} describe failed: {}", j.label, d.name, e.what()));
                j.failed = true;
                continue;
            }
            if (!j.unknown_is_gone && !unknown.empty()) {
                // Its ledger does not say where it ran: an id unknown here may live elsewhere.
                fail(
                    fmt::format("{}: {} does not know {} in {}; its ledger does not name a "
                                "region: if it ran in another one, run sky gc with that region",
                                j.label, d.name, join(unknown, 64), region));
                j.failed = true;
                continue;
            }
            j.ids = live;
            if (dry_run) {
                say(live.empty() ? fmt::format("{}: no machines left; would delete its key pair "
                                               "and firewall and close its ledger",
                                               j.label)
                                 : fmt::format("{}: would terminate {}", j.label, join(live, 64)));
                continue;
            }
            if (live.empty()) continue;
            say(fmt::format("{}: terminating {}", j.label, join(live, 64)));
            try {
                adapter->terminate(live);
            } catch (const std::exception& e) {
                fail(fmt::format("{}: {} terminate failed: {}", j.label, d.name, e.what()));
                j.failed = true;
            }
        }
        if (dry_run) return;
        // Confirm (bounded): firewall rules cannot go while a machine still uses them.
        const auto until = Clock::now() + kConfirmLimit;
        auto delay = std::chrono::milliseconds(500);
        for (;;) {
            bool waiting = false;
            for (auto& j : jobs) {
                if (j.failed || j.ids.empty()) continue;
                try {
                    std::vector<std::string> still;
                    for (const auto& i : adapter->describe(j.ids))
                        if (!is_done(i, j.unknown_is_gone)) still.push_back(i.id);
                    j.ids = still;
                } catch (const std::exception&) {
                    // A passing error: ask again on the next round.
                }
                waiting = waiting || !j.ids.empty();
            }
            if (!waiting || Clock::now() >= until) break;
            std::this_thread::sleep_for(delay);
            delay = std::min(delay * 2, std::chrono::milliseconds(5000));
        }
        for (auto& j : jobs) {
            if (j.failed) continue;
            if (!j.ids.empty()) {
                fail(fmt::format("{}: still stopping after {} s: {}; run sky gc again", j.label,
                                 kConfirmLimit.count(), join(j.ids, 64)));
                continue;
            }
            // A firewall that a machine which has just ended still holds goes a little later.
            const std::vector<std::string> left =
                detail::delete_infra_until_gone(*adapter, j.pool_id, adapter->login().infra_wait);
            if (j.record) close_ledger(*j.record, j.known, left);
            if (!left.empty()) {
                fail(
                    fmt::format("{}: no machines left, but still there: {}; run sky gc again later",
                                j.label, join(left, 16)));
            } else if (j.record) {
                say(fmt::format("{}: nothing left; key pair and firewall deleted; ledger closed",
                                j.label));
            } else {
                say(fmt::format("{}: nothing left; key pair and firewall deleted", j.label));
            }
        }
    }

    void prune(const LedgerRecord& r) {
        const auto closed_at =
            std::chrono::system_clock::time_point(std::chrono::seconds(r.closed_unix));
        if (dry_run || r.closed_unix <= 0 ||
            std::chrono::system_clock::now() - closed_at < kKeepClosed)
            return;
        std::error_code ec;
        std::filesystem::remove(r.file, ec);
    }

    int run() {
        std::vector<std::string> skipped;
        const auto records = Ledger::read_all(&skipped);
        for (const auto& why : skipped) fail("skipped a ledger file: " + why);

        std::map<std::string, const LedgerRecord*> by_pool;
        for (const auto& r : records) by_pool[r.pool_id] = &r;

        // Cloud pools' machines found by tag, per provider.
        std::vector<std::string> not_asked;
        const auto clouds = cloud_providers(provider, &not_asked);
        std::map<std::string, std::map<std::string, std::vector<CloudInstance>>> tagged;
        std::set<std::string> asked;
        for (const auto* d : clouds) {
            TaggedMachines t = list_tagged(*d);
            if (t.unconfigured) {
                not_asked.push_back(fmt::format("{} ({})", t.provider, t.error));
                continue;
            }
            if (!t.error.empty()) {
                fail(fmt::format("{}: cannot list its machines: {}", t.provider, t.error));
                continue;
            }
            asked.insert(t.provider);
            for (auto& m : t.machines) tagged[t.provider][m.pool_id].push_back(std::move(m));
        }

        std::map<std::string, std::vector<CloudJob>> cloud_jobs;
        int running = 0;
        for (const auto& r : records) {
            if (provider && r.provider != *provider) continue;
            const auto owner = r.owner();
            const auto& found = tagged[r.provider][r.pool_id];
            if (!r.closed && owner == LedgerRecord::Owner::alive) {
                ++running;
                say(fmt::format("{}: running: left alone", describe(r)));
                continue;
            }
            if (owner == LedgerRecord::Owner::other_host) {
                if (!r.closed)
                    say(fmt::format("{}: started on another machine: left alone", describe(r)));
                continue;
            }
            if (owner == LedgerRecord::Owner::unknown && !r.closed) {
                say(
                    fmt::format("{}: cannot tell whether it still runs (written by an older sky "
                                "without the ledger lock): left alone",
                                describe(r)));
                continue;
            }
            const auto live = r.live_instances();
            if (r.closed && live.empty() && found.empty() && r.infra_left.empty()) {
                prune(r);
                continue;
            }
            const ProviderDescriptor* d = detail::find_provider(r.provider);
            if (!d) {
                fail(
                    fmt::format("{}: '{}' is a provider its program defined: sky gc cannot "
                                "reach it (its machines end by their idle timeout)",
                                describe(r), r.provider));
                continue;
            }
            if (r.provider == "local") {
                collect_local(r);
            } else if (r.provider == "ssh") {
                collect_ssh(r);
            } else if (!d->make_adapter) {
                fail(fmt::format("{}: this build of sky cannot reach {}", describe(r), r.provider));
            } else if (!asked.count(r.provider)) {
                fail(fmt::format("{}: {} was not asked (no credentials?): nothing done",
                                 describe(r), r.provider));
            } else {
                CloudJob j;
                j.record = &r;
                j.pool_id = r.pool_id;
                j.label = describe(r);
                std::set<std::string> ids(live.begin(), live.end());
                for (const auto& m : found) ids.insert(m.id);
                j.ids.assign(ids.begin(), ids.end());
                j.known = j.ids;
                cloud_jobs[r.provider].push_back(std::move(j));
            }
        }

        // Tagged machines whose pool has no ledger here: perhaps another client's.
        int unknown = 0;
        for (const auto& [prov, pools] : tagged)
            for (const auto& [pool_id, machines] : pools) {
                if (by_pool.count(pool_id) || machines.empty()) continue;
                std::vector<std::string> ids;
                for (const auto& m : machines) ids.push_back(m.id);
                const std::string label =
                    fmt::format("{} pool {} (no ledger on this machine)", prov,
                                pool_id.empty() ? std::string("(untagged)") : pool_id);
                if (!include_unknown || pool_id.empty()) {
                    ++unknown;
                    say(
                        fmt::format("{}: {}: left (another client's? --include-unknown ends "
                                    "them)",
                                    label, join(ids, 64)));
                    continue;
                }
                CloudJob j;
                j.pool_id = pool_id;
                j.label = label;
                j.ids = ids;
                j.known = ids;
                cloud_jobs[prov].push_back(std::move(j));
            }

        for (auto& [prov, jobs] : cloud_jobs)
            if (const auto* d = detail::find_provider(prov)) collect_cloud(*d, std::move(jobs));

        if (!not_asked.empty()) say("not asked: " + join(not_asked, 16));
        if (running) say(fmt::format("{} running pool(s) left alone", running));
        return status;
    }
};

}  // namespace

int gc_command(const std::vector<std::string>& args) {
    Gc gc;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            std::fputs(gc_usage, stdout);
            return 0;
        } else if (a == "--provider" && i + 1 < args.size()) {
            gc.provider = args[++i];
        } else if (a.rfind("--provider=", 0) == 0) {
            gc.provider = a.substr(11);
        } else if (a == "--dry-run" || a == "-n") {
            gc.dry_run = true;
        } else if (a == "--include-unknown") {
            gc.include_unknown = true;
        } else {
            std::fprintf(stderr, "sky gc: unknown option '%s'\n\n%s", terminal_safe(a).c_str(),
                         gc_usage);
            return 2;
        }
    }
    if (gc.provider && !detail::find_provider(*gc.provider)) {
        std::string names;
        for (const auto& d : detail::providers())
            names += (names.empty() ? "" : ", ") + std::string(d.name);
        std::fprintf(stderr, "sky gc: unknown provider '%s' (known: %s)\n",
                     terminal_safe(*gc.provider).c_str(), names.c_str());
        return 2;
    }
    return gc.run();
}

}  // namespace sky::cli
