// `sky ls`: the pools in this machine's ledger that are running or left machines behind, and the
// machines found by sky's tag at every cloud provider whose credentials are set. `sky ls
// --provider aws` keeps its own table (the instances tagged sky:pool that EC2 still knows).
// Prints no credential, only instance facts.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/pools.hpp"
#include "pool/display.hpp"
#include "providers/aws/ec2_client.hpp"

namespace sky::cli {

namespace {

using nlohmann::json;

constexpr const char* ls_usage =
    "usage: sky ls [--provider NAME] [--region R] [--all]\n"
    "\n"
    "Without --provider: the pools in this machine's ledger (~/.sky/pools, or $SKY_HOME/pools)\n"
    "that are running or left machines behind (pool, provider, owner process and whether it\n"
    "still runs, when it started, its machines), then the machines found by sky's tag at every\n"
    "cloud provider whose credentials are set, each with what the ledger here says of its pool.\n"
    "\n"
    "  --provider NAME  one provider: local, ssh (ledger only) or a cloud (ledger and tags);\n"
    "                   aws prints EC2's own table of the instances tagged sky:pool\n"
    "  --region R       aws: the region (default: AWS_REGION, AWS_DEFAULT_REGION, else\n"
    "                   us-east-1)\n"
    "  --all            aws: terminated instances too\n"
    "AWS credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials "
    "(AWS_PROFILE);\n"
    "endpoint: AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL, else AWS's.\n"
    "Exit status: 0, 1 when a provider could not be asked, 2 on a usage error.\n";

std::string env_or(const char* name, std::string fallback = {}) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

using sky::detail::aws::list_of;
using sky::detail::aws::str_of;

struct Row {
    std::string id, pool, type, state, address, spot, launched;
};

int ls_aws(const std::string& region, bool all) {
    auto credentials = detail::aws::load_default_credentials();
    if (!credentials) {
        std::fputs(
            "sky ls: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or "
            "configure ~/.aws/credentials\n",
            stderr);
        return 1;
    }
    detail::aws::Ec2ClientConfig cc;
    cc.region = region;
    const detail::aws::EndpointChoice endpoint = detail::aws::choose_endpoint();
    cc.endpoint = endpoint.url;
    cc.endpoint_source = endpoint.source;
    cc.credentials = *credentials;
    cc.http.retry.max_attempts = 3;
    std::vector<Row> rows;
    try {
        detail::aws::Ec2Client client(cc);
        std::string token;
        for (int page = 0; page < 100; ++page) {  // bounded pagination
            detail::aws::QueryParams p;
            p.set("Filter.1.Name", "tag-key");
            p.set("Filter.1.Value.1", "sky:pool");
            if (!all) {
                p.set_list("Filter.2.Value",
                           {"pending", "running", "shutting-down", "stopping", "stopped"});
                p.set("Filter.2.Name", "instance-state-name");
            }
            if (!token.empty()) p.set("NextToken", token);
            json r = client.call_json("DescribeInstances", p);
            for (const auto& res : list_of(r, "reservationSet")) {
                for (const auto& inst : list_of(res, "instancesSet")) {
                    Row row;
                    row.id = str_of(inst, "instanceId");
                    row.type = str_of(inst, "instanceType");
                    row.state = inst.contains("instanceState")
                                    ? str_of(inst["instanceState"], "name")
                                    : std::string();
                    row.address = str_of(inst, "ipAddress");
                    if (row.address.empty()) row.address = "-";
                    row.spot = str_of(inst, "instanceLifecycle") == "spot" ? "yes" : "no";
                    row.launched = str_of(inst, "launchTime");
                    for (const auto& tag : list_of(inst, "tagSet"))
                        if (str_of(tag, "key") == "sky:pool") row.pool = str_of(tag, "value");
                    rows.push_back(std::move(row));
                }
            }
            token = r.is_object() ? str_of(r, "nextToken") : std::string();
            if (token.empty()) break;
        }
    } catch (const std::exception& e) {
        // The client redacts secrets from its errors.
        // Quoted answers come from the endpoint: shown with control characters escaped.
        std::fprintf(stderr, "sky ls: AWS DescribeInstances in %s failed: %s\n", region.c_str(),
                     detail::terminal_safe(e.what()).c_str());
        return 1;
    }
    if (rows.empty()) {
        std::printf("no sky instances in aws %s\n", region.c_str());
        return 0;
    }
    Row head{"INSTANCE", "POOL", "TYPE", "STATE", "ADDRESS", "SPOT", "LAUNCHED"};
    std::size_t w[6] = {head.id.size(),    head.pool.size(),    head.type.size(),
                        head.state.size(), head.address.size(), head.spot.size()};
    for (const auto& r : rows) {
        w[0] = std::max(w[0], r.id.size());
        w[1] = std::max(w[1], r.pool.size());
        w[2] = std::max(w[2], r.type.size());
        w[3] = std::max(w[3], r.state.size());
        w[4] = std::max(w[4], r.address.size());
        w[5] = std::max(w[5], r.spot.size());
    }
    auto print = [&](const Row& r) {
        std::string line = fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}", r.id,
                                       w[0], r.pool, w[1], r.type, w[2], r.state, w[3], r.address,
                                       w[4], r.spot, w[5], r.launched);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        // Tags and ids are whatever the endpoint answered: no escape sequence reaches the terminal.
        std::printf("%s\n", detail::terminal_safe(line).c_str());
    };
    print(head);
    for (const auto& r : rows) print(r);
    return 0;
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

// `sky ls` and `sky ls --provider P` (P other than aws).
int ls_ledger_and_tags(const std::optional<std::string>& provider) {
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
        std::vector<std::vector<std::string>> rows = {
            {"POOL", "PROVIDER", "REGION", "OWNER", "STATE", "STARTED", "INSTANCES", "INFRA LEFT"}};
        for (const auto& r : pools) {
            const auto live = r.live_instances();
            rows.push_back(
                {r.pool_id, r.provider, r.region.empty() ? "-" : r.region,
                 fmt::format("pid {}", r.owner_pid), cli::pool_state(r), cli::utc(r.started_unix),
                 live.empty() ? "0" : fmt::format("{}: {}", live.size(), cli::join(live)),
                 cli::join(r.infra_left)});
        }
        cli::print_table(rows);
    }
    for (const auto& why : skipped)
        std::fprintf(stderr, "sky ls: skipped a ledger file: %s\n",
                     detail::terminal_safe(why).c_str());

    std::vector<std::string> not_asked;
    const auto clouds = cli::cloud_providers(provider, &not_asked);
    std::map<std::string, const detail::LedgerRecord*> by_pool;
    for (const auto& r : all_records) by_pool[r.pool_id] = &r;
    std::vector<std::vector<std::string>> rows = {
        {"PROVIDER", "INSTANCE", "POOL", "TYPE", "STATE", "ADDRESS", "SPOT", "POOL HERE"}};
    for (const auto* d : clouds) {
        const cli::TaggedMachines t = cli::list_tagged(*d);
        if (t.unconfigured) {
            not_asked.push_back(fmt::format("{} ({})", t.provider, t.error));
            continue;
        }
        if (!t.error.empty()) {
            std::fprintf(stderr, "sky ls: %s: %s\n", t.provider.c_str(), t.error.c_str());
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
                            it == by_pool.end() ? "no ledger here" : cli::pool_state(*it->second)});
        }
    }
    if (rows.size() > 1) {
        std::printf("\n");
        cli::print_table(rows);
    }
    if (!not_asked.empty()) std::printf("not asked: %s\n", cli::join(not_asked, 16).c_str());
    return status;
}

}  // namespace

int ls_command(const std::vector<std::string>& args) {
    std::string provider, region = env_or("AWS_REGION", env_or("AWS_DEFAULT_REGION", "us-east-1"));
    bool all = false, region_given = false;
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
            region = args[++i];
            region_given = true;
        } else if (a.rfind("--region=", 0) == 0) {
            region = a.substr(9);
            region_given = true;
        } else if (a == "--all") {
            all = true;
        } else {
            std::fprintf(stderr, "sky ls: unknown option '%s'\n\n%s", a.c_str(), ls_usage);
            return 2;
        }
    }
    if (provider != "aws" && (all || region_given)) {
        std::fprintf(stderr, "sky ls: --region and --all apply to --provider aws\n\n%s", ls_usage);
        return 2;
    }
    if (provider.empty()) return ls_ledger_and_tags(std::nullopt);
    if (provider != "aws") {
        if (!detail::find_provider(provider)) {
            std::string names;
            for (const auto& d : detail::providers())
                names += (names.empty() ? "" : ", ") + std::string(d.name);
            std::fprintf(stderr, "sky ls: unknown provider '%s' (known: %s)\n",
                         detail::terminal_safe(provider).c_str(), names.c_str());
            return 2;
        }
        return ls_ledger_and_tags(provider);
    }
    return ls_aws(region, all);
}

}  // namespace sky::cli
