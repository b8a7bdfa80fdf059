// `sky ls --provider aws`: the instances sky launched (tagged sky:pool) and still known to EC2,
// e.g. what a crashed client left behind. Prints no credential, only instance facts.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "pool/display.hpp"
#include "providers/aws/ec2_client.hpp"

namespace sky::cli {

namespace {

using nlohmann::json;

constexpr const char* ls_usage =
    "usage: sky ls --provider aws [--region R] [--all]\n"
    "\n"
    "Lists the instances sky launched (tag sky:pool) that are not terminated.\n"
    "  --provider aws   the provider to ask (only aws so far)\n"
    "  --region R       the region (default: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1)\n"
    "  --all            terminated instances too\n"
    "Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials (AWS_PROFILE);\n"
    "endpoint: AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL, else AWS's.\n";

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

}  // namespace

int ls_command(const std::vector<std::string>& args) {
    std::string provider, region = env_or("AWS_REGION", env_or("AWS_DEFAULT_REGION", "us-east-1"));
    bool all = false;
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
        } else if (a.rfind("--region=", 0) == 0) {
            region = a.substr(9);
        } else if (a == "--all") {
            all = true;
        } else {
            std::fprintf(stderr, "sky ls: unknown option '%s'\n\n%s", a.c_str(), ls_usage);
            return 2;
        }
    }
    if (provider.empty()) {
        std::fprintf(stderr, "sky ls: --provider is required\n\n%s", ls_usage);
        return 2;
    }
    if (provider != "aws") {
        std::fprintf(stderr, "sky ls: provider '%s' is not supported yet (only aws)\n",
                     provider.c_str());
        return 2;
    }
    return ls_aws(region, all);
}

}  // namespace sky::cli
