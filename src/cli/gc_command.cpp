// `sky gc`: ends what pools that are no longer running left behind, and never touches a running
// pool's machines. A pool is no longer running when its ledger is closed with something left or
// its owner has ended (the ledger's lock is free). Machines tagged with a pool that has no ledger
// on this machine may be another client's: listed, and collected only with --include-unknown.
// What ending means is each provider's own (its descriptor's `collect`): gc decides which pools,
// the providers do the rest.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/pools.hpp"
#include "pool/display.hpp"

namespace sky::cli {

namespace {

using detail::Ledger;
using detail::LedgerRecord;
using detail::ProviderDescriptor;
using detail::terminal_safe;

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

constexpr auto kKeepClosed = std::chrono::hours(24 * 7);

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

        // Machines found by tag, per provider.
        std::vector<std::string> not_asked;
        const auto clouds = listing_providers(provider, &not_asked);
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

        std::map<std::string, std::vector<detail::GcPool>> jobs;
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
            if (!d->collect) {
                fail(fmt::format("{}: this build of sky cannot reach {}", describe(r), r.provider));
            } else if (d->list_machines && !asked.count(r.provider)) {
                fail(fmt::format("{}: {} was not asked (no credentials?): nothing done",
                                 describe(r), r.provider));
            } else {
                detail::GcPool p;
                p.record = &r;
                p.pool_id = r.pool_id;
                p.label = describe(r);
                p.machines = live;
                for (const auto& m : found)
                    if (std::find(p.machines.begin(), p.machines.end(), m.id) == p.machines.end())
                        p.machines.push_back(m.id);
                jobs[r.provider].push_back(std::move(p));
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
                jobs[prov].push_back({nullptr, pool_id, label, ids});
            }

        const detail::GcOptions options{.dry_run = dry_run,
                                        .say = [this](const std::string& line) { say(line); },
                                        .fail = [this](const std::string& line) { fail(line); }};
        for (auto& [prov, pools] : jobs)
            if (const auto* d = detail::find_provider(prov); d && d->collect)
                d->collect(std::move(pools), options);

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
