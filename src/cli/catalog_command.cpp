// `sky catalog`: the embedded offers (api.md §13), filtered with the pool's selection rule.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sky/catalog.hpp>
#include <sky/errors.hpp>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace sky::cli {
namespace {

constexpr const char* kUsage =
    R"(usage: sky catalog [--accelerator NAME] [--provider NAME] [--spot] [--region R]
                   [--cpu N] [--memory SIZE] [--limit N]

Lists the offers in sky's built-in catalog that meet the request, cheapest first, with the date
on which their prices were known. A pool picks from the same list (live provider prices may
differ; the pool refreshes them where the provider publishes prices).

  --accelerator NAME  e.g. H100, A100-80GB, L4:4 (count is a minimum)
  --provider NAME     aws, runpod, vastai, verda or digitalocean
  --spot              only offers sold as spot, ranked by spot price ("-" = price known live only)
  --region R          exact region, e.g. us-east-1
  --cpu N             minimum vCPUs
  --memory SIZE       minimum memory, e.g. 64GB
  --limit N           show at most N offers
  --help              this text
)";

std::string money(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "$%.3f", v);
    return buf;
}

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

int usage_error(const std::string& message) {
    std::cerr << "sky catalog: " << message << "\n\n" << kUsage;
    return 2;
}

}  // namespace

int catalog_command(const std::vector<std::string>& args) {
    SelectionRequest request;
    std::optional<std::string> provider;
    std::optional<std::size_t> limit;
    bool spot = false;
    try {
        for (std::size_t i = 0; i < args.size(); ++i) {
            std::string arg = args[i];
            std::optional<std::string> inline_value;
            if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
                inline_value = arg.substr(eq + 1);
                arg = arg.substr(0, eq);
            }
            auto value = [&]() -> std::string {
                if (inline_value) return *inline_value;
                if (i + 1 >= args.size()) throw ConfigError(arg + " needs a value");
                return args[++i];
            };
            auto integer = [&](const std::string& v) {
                std::size_t used = 0;
                int n = -1;
                try {
                    n = std::stoi(v, &used);
                } catch (const std::exception&) {
                }
                if (used != v.size() || n < 0)
                    throw ConfigError(arg + ": expected a non-negative number, got '" + v + "'");
                return n;
            };
            if (arg == "--help" || arg == "-h") {
                std::cout << kUsage;
                return 0;
            } else if (arg == "--accelerator" || arg == "-a") {
                request.accelerator = Accelerator::parse(value());
            } else if (arg == "--provider" || arg == "-p") {
                provider = value();
            } else if (arg == "--spot") {
                spot = true;
            } else if (arg == "--region" || arg == "-r") {
                request.region = value();
            } else if (arg == "--cpu") {
                request.cpu = integer(value());
            } else if (arg == "--memory") {
                request.memory = value();
                (void)parse_memory_gb(*request.memory, "--memory");
            } else if (arg == "--limit") {
                limit = static_cast<std::size_t>(integer(value()));
            } else {
                return usage_error("unknown option '" + args[i] + "'");
            }
        }
    } catch (const ConfigError& e) {
        return usage_error(e.what());
    }
    request.spot = spot ? Spot(Spot::Always{}) : Spot(Spot::Never{});

    const auto& catalog = Catalog::embedded();
    if (provider) {
        const auto names = catalog.providers();
        std::string lower = *provider;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (std::find(names.begin(), names.end(), lower) == names.end()) {
            std::string list;
            for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
            return usage_error("unknown provider '" + *provider + "' (the catalog has " + list +
                               ")");
        }
    }
    // Without an accelerator, list everything (CPU and GPU); with one, the selection rule.
    std::vector<Offer> offers;
    try {
        if (request.accelerator || request.cpu || request.memory) {
            offers = catalog.select(request, provider.value_or(""));
        } else {
            const auto all = provider ? catalog.offers(*provider) : catalog.offers();
            for (const auto& o : all) {
                std::string why;
                if (!offer_matches(o, request, &why) && why.rfind("accelerator", 0) != 0)
                    continue;  // keep GPU rows, which the CPU-only default would drop
                offers.push_back(o);
            }
            std::stable_sort(offers.begin(), offers.end(), [&](const Offer& a, const Offer& b) {
                return a.hourly_price(spot) < b.hourly_price(spot);
            });
        }
    } catch (const ConfigError& e) {
        return usage_error(e.what());
    }
    if (offers.empty()) {
        const auto pool = provider ? catalog.offers(*provider) : catalog.offers();
        std::cerr << "sky catalog: no matching offers: " << explain_no_match(pool, request) << "\n";
        return 1;
    }
    const std::size_t shown = std::min(offers.size(), limit.value_or(offers.size()));

    const std::vector<std::string> header = {"PROVIDER",    "INSTANCE TYPE", "ACCELERATOR",
                                             "VCPU",        "MEMORY",        "REGION",
                                             "ON-DEMAND/H", "SPOT/H",        "PRICES AS OF"};
    std::vector<std::vector<std::string>> rows;
    for (std::size_t i = 0; i < shown; ++i) {
        const auto& o = offers[i];
        const std::string acc = o.accelerator.empty()
                                    ? "-"
                                    : std::to_string(o.accelerator_count) + "x " + o.accelerator +
                                          " " + num(o.gpu_memory_gb) + "GB";
        const std::string spot_col =
            !o.spot_available ? "n/a" : (o.spot_price ? money(*o.spot_price) : "-");
        rows.push_back({o.provider, o.instance_type, acc, std::to_string(o.vcpus),
                        num(o.memory_gb) + "GB", o.region.empty() ? "(any)" : o.region,
                        money(o.on_demand_price), spot_col, o.prices_date});
    }
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
        width[c] = header[c].size();
        for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
    }
    const auto numeric = [](std::size_t c) { return c == 3 || c == 4 || c == 6 || c == 7; };
    auto print = [&](const std::vector<std::string>& r) {
        std::string line;
        for (std::size_t c = 0; c < r.size(); ++c) {
            const std::string pad(width[c] - r[c].size(), ' ');
            line += numeric(c) ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : "");
            if (c + 1 < r.size()) line += "  ";
        }
        std::cout << line << "\n";
    };
    print(header);
    for (const auto& r : rows) print(r);
    if (shown < offers.size())
        std::cout << "(" << offers.size() - shown << " more; --limit to show them)\n";
    std::cout << "Prices are list prices as of the date shown; live prices may differ."
              << (spot ? " Spot \"-\": known only from the provider at run time." : "") << "\n";
    return 0;
}

}  // namespace sky::cli
