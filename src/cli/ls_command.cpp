// `sky ls`: the pools in this machine's ledger that are running or left something behind, and
// the machines found by sky's tag at every provider that lists machines and has its credentials,
// each through its descriptor (`--provider NAME` for one, `--region` and `--all` passed on).
// Prints no credential, only instance facts.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/pools.hpp"
#include "pool/display.hpp"

namespace sky::cli {

namespace {

constexpr const char* ls_usage =
    "usage: sky ls [--provider NAME] [--region R] [--all]\n"
    "\n"
    "The pools in this machine's ledger (~/.sky/pools, or $SKY_HOME/pools) that are running or\n"
    "left machines or infrastructure behind (pool, provider, owner process and whether it still\n"
    "runs, when it started, what it has spent and its budget's limits, its machines, what of its\n"
    "infrastructure is left), then the machines found by sky's tag at every cloud provider\n"
    "whose credentials are set, each with what the ledger here says of its pool.\n"
    "\n"
    "  --provider NAME  one provider (local and ssh: the ledger only)\n"
    "  --region R       ask the cloud in this region (default: its configuration, e.g.\n"
    "                   AWS_REGION; clouds that place machines themselves ignore it)\n"
    "  --all            also machines the cloud still shows as ended (EC2 keeps terminated\n"
    "                   instances for about an hour)\n"
    "Credentials and endpoints: as for a pool (docs/providers.md); e.g. AWS_ACCESS_KEY_ID and\n"
    "AWS_SECRET_ACCESS_KEY or ~/.aws/credentials, AWS_ENDPOINT_URL_EC2.\n"
    "Exit status: 0, 1 when a provider could not be asked, 2 on a usage error.\n";

// A pool's spending limits as its ledger records them: "$40.00", "$6.00/h", both, or "-".
std::string budget_limit(const detail::LedgerRecord& r) {
    std::string total = r.limit_usd > 0 ? fmt::format("${:.2f}", r.limit_usd) : "";
    std::string hourly = r.hourly_limit_usd > 0 ? fmt::format("${:.2f}/h", r.hourly_limit_usd) : "";
    if (total.empty() && hourly.empty()) return "-";
    if (total.empty() || hourly.empty()) return total + hourly;
    return total + ", " + hourly;
}

// The ledger's pools worth showing: running, or not running with machines left.
std::vector<detail::LedgerRecord> shown_pools(const std::optional<std::string>& provider,
                                              std::vector<std::string>& skipped) {
    std::vector<detail::LedgerRecord> out;
    for (auto& r : detail::Ledger::read_all(&skipped)) {
        if (provider && r.provider != *provider) continue;
        if (r.closed && !r.leaves_something()) continue;
        out.push_back(std::move(r));
    }
    return out;
}

// The ledger's pools, then the tagged machines of each provider that lists any.
int ls(const std::optional<std::string>& provider, const detail::MachineQuery& query) {
    int status = 0;
    std::vector<std::string> skipped;
    const auto all_records = detail::Ledger::read_all(nullptr);
    const auto pools = shown_pools(provider, skipped);
    std::string dir;
    try {
        dir = detail::Ledger::directory().string();
    } catch (const std::exception& e) {
        dir = e.what();
    }
    if (pools.empty()) {
        std::printf("no live pools in the ledger (%s)\n", detail::terminal_safe(dir).c_str());
    } else {
        std::vector<std::vector<std::string>> rows = {{"POOL", "PROVIDER", "REGION", "OWNER",
                                                       "STATE", "STARTED", "SPENT", "LIMIT",
                                                       "INSTANCES", "INFRA LEFT"}};
        for (const auto& r : pools) {
            const auto live = r.live_instances();
            rows.push_back(
                {r.pool_id, r.provider, r.region.empty() ? "-" : r.region,
                 fmt::format("pid {}", r.owner_pid), cli::pool_state(r), cli::utc(r.started_unix),
                 r.spent_usd ? fmt::format("${:.4f}", *r.spent_usd) : "-", budget_limit(r),
                 live.empty() ? "0" : fmt::format("{}: {}", live.size(), cli::join(live)),
                 cli::join(r.infra_left)});
        }
        cli::print_table(rows);
    }
    for (const auto& why : skipped)
        std::fprintf(stderr, "sky ls: skipped a ledger file: %s\n",
                     detail::terminal_safe(why).c_str());

    std::vector<std::string> not_asked;
    const auto clouds = cli::listing_providers(provider, &not_asked);
    std::map<std::string, const detail::LedgerRecord*> by_pool;
    for (const auto& r : all_records) by_pool[r.pool_id] = &r;
    std::vector<std::vector<std::string>> rows = {{"PROVIDER", "INSTANCE", "POOL", "TYPE", "STATE",
                                                   "ADDRESS", "SPOT", "LAUNCHED", "POOL HERE"}};
    for (const auto* d : clouds) {
        const cli::TaggedMachines t = cli::list_tagged(*d, query);
        if (t.unconfigured) {
            not_asked.push_back(fmt::format("{} ({})", t.provider, t.error));
            continue;
        }
        if (!t.error.empty()) {
            // Quoted answers come from the endpoint: shown with control characters escaped.
            std::fprintf(stderr, "sky ls: %s%s: %s\n", t.provider.c_str(),
                         t.region.empty() ? "" : (" " + t.region).c_str(), t.error.c_str());
            status = 1;
            continue;
        }
        if (t.machines.empty()) {
            if (!d->credentials) continue;  // a cloud in a box (simulated): nothing to say
            std::printf("no sky machines at %s%s\n", t.provider.c_str(),
                        t.region.empty() ? "" : (" " + t.region).c_str());
            continue;
        }
        for (const auto& m : t.machines) {
            auto it = by_pool.find(m.pool_id);
            rows.push_back({t.provider, m.id, m.pool_id.empty() ? "-" : m.pool_id,
                            m.instance_type.empty() ? "-" : m.instance_type,
                            std::string(cli::state_name(m.state)),
                            m.public_ip.empty() ? "-" : m.public_ip, m.spot ? "yes" : "no",
                            m.launched.empty() ? "-" : m.launched,
                            it == by_pool.end() ? "no ledger here" : cli::pool_state(*it->second)});
        }
    }
    if (rows.size() > 1) {
        std::printf("\n");
        cli::print_table(rows);
    }
    if (!not_asked.empty()) {
        if (provider) {
            // Asked for by name: that it could not be asked is the answer, and an error.
            std::fprintf(stderr, "sky ls: not asked: %s\n", cli::join(not_asked, 16).c_str());
            status = 1;
        } else {
            std::printf("not asked: %s\n", cli::join(not_asked, 16).c_str());
        }
    }
    return status;
}

}  // namespace

int ls_command(const std::vector<std::string>& args) {
    std::optional<std::string> provider;
    detail::MachineQuery query;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            std::fputs(ls_usage, stdout);
            return 0;
        } else if (a == "--provider" && i + 1 < args.size()) {
            provider = args[++i];
        } else if (a.rfind("--provider=", 0) == 0) {
            provider = a.substr(11);
        } else if (a == "--region" && i + 1 < args.size()) {
            query.region = args[++i];
        } else if (a.rfind("--region=", 0) == 0) {
            query.region = a.substr(9);
        } else if (a == "--all") {
            query.include_gone = true;
        } else {
            std::fprintf(stderr, "sky ls: unknown option '%s'\n\n%s",
                         detail::terminal_safe(a).c_str(), ls_usage);
            return 2;
        }
    }
    if (provider && !detail::find_provider(*provider)) {
        std::string names;
        for (const auto& d : detail::providers())
            names += (names.empty() ? "" : ", ") + std::string(d.name);
        std::fprintf(stderr, "sky ls: unknown provider '%s' (known: %s)\n",
                     detail::terminal_safe(*provider).c_str(), names.c_str());
        return 2;
    }
    return ls(provider, query);
}

}  // namespace sky::cli
