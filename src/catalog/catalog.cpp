// The offer catalog: CSV parsing, the embedded catalog, provider index and live merges.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sky/catalog.hpp>
#include <sky/errors.hpp>
#include <tuple>

#include "catalog/embedded.hpp"
#include "catalog/names.hpp"
#include "catalog/text.hpp"

namespace sky::inline v0 {
namespace {

constexpr std::string_view kHeader =
    "instance_type,accelerator,accelerator_count,gpu_memory_gb,vcpus,memory_gb,region,"
    "on_demand_price,spot_price,prices_date";

std::vector<std::string_view> split(std::string_view line, char sep) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (true) {
        const auto pos = line.find(sep, start);
        out.push_back(detail::trim(line.substr(start, pos - start)));
        if (pos == std::string_view::npos) break;
        start = pos + 1;
    }
    return out;
}

struct RowError {
    std::string what;
};

template <class T>
T number(std::string_view field, const char* column) {
    T v{};
    auto [p, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (field.empty() || ec != std::errc{} || p != field.data() + field.size())
        throw RowError{std::string(column) + " is not a number: '" + std::string(field) + "'"};
    if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(v)) throw RowError{std::string(column) + " is not finite"};
    }
    if (v < 0) throw RowError{std::string(column) + " is negative"};
    return v;
}

bool is_iso_date(std::string_view d) {
    if (d.size() != 10 || d[4] != '-' || d[7] != '-') return false;
    for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
        if (!std::isdigit(static_cast<unsigned char>(d[i]))) return false;
    return true;
}

Offer parse_row(std::string_view provider, const std::vector<std::string_view>& f) {
    if (f.size() != 10) throw RowError{"expected 10 fields, found " + std::to_string(f.size())};
    Offer o;
    o.provider = detail::to_lower(provider);
    o.instance_type = std::string(f[0]);
    if (o.instance_type.empty()) throw RowError{"empty instance_type"};
    if (!f[1].empty()) {
        auto canonical = detail::canonical_accelerator_name(f[1]);
        if (!canonical)
            throw RowError{"unknown accelerator '" + std::string(f[1]) +
                           "' (add it to src/catalog/accelerator.cpp)"};
        o.accelerator = *canonical;
    }
    o.accelerator_count = number<int>(f[2], "accelerator_count");
    o.gpu_memory_gb = number<double>(f[3], "gpu_memory_gb");
    if (o.accelerator.empty() != (o.accelerator_count == 0))
        throw RowError{"accelerator and accelerator_count disagree"};
    o.vcpus = number<int>(f[4], "vcpus");
    o.memory_gb = number<double>(f[5], "memory_gb");
    o.region = std::string(f[6]);
    o.on_demand_price = number<double>(f[7], "on_demand_price");
    if (f[8] == "none") {
        o.spot_available = false;
    } else if (!f[8].empty()) {
        o.spot_price = number<double>(f[8], "spot_price");
    }
    if (!is_iso_date(f[9]))
        throw RowError{"prices_date must be YYYY-MM-DD, got '" + std::string(f[9]) + "'"};
    o.prices_date = std::string(f[9]);
    return o;
}

}  // namespace

Catalog::Catalog(std::vector<Offer> offers) : offers_(std::move(offers)) { reindex(); }

std::vector<Offer> Catalog::parse_csv(std::string_view provider, std::string_view text) {
    std::vector<Offer> out;
    bool header_seen = false;
    std::size_t line_no = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        line = detail::trim(line);
        if (line.empty() || line.front() == '#') continue;
        if (!header_seen) {
            if (line != kHeader)
                throw ConfigError("catalog " + std::string(provider) + ".csv line " +
                                  std::to_string(line_no) + ": expected the header '" +
                                  std::string(kHeader) + "'");
            header_seen = true;
            continue;
        }
        try {
            out.push_back(parse_row(provider, split(line, ',')));
        } catch (const RowError& e) {
            throw ConfigError("catalog " + std::string(provider) + ".csv line " +
                              std::to_string(line_no) + ": " + e.what);
        }
    }
    return out;
}

const Catalog& Catalog::embedded() {
    static const Catalog catalog = [] {
        std::vector<Offer> all;
        for (const auto* e = detail::embedded_catalog_csvs(); e->provider; ++e) {
            auto rows = parse_csv(e->provider, e->text);
            all.insert(all.end(), std::make_move_iterator(rows.begin()),
                       std::make_move_iterator(rows.end()));
        }
        return Catalog(std::move(all));
    }();
    return catalog;
}

void Catalog::reindex() {
    by_provider_.clear();
    for (std::size_t i = 0; i < offers_.size(); ++i)
        by_provider_[detail::to_lower(offers_[i].provider)].push_back(i);
}

std::vector<Offer> Catalog::offers(std::string_view provider) const {
    std::vector<Offer> out;
    if (auto it = by_provider_.find(detail::to_lower(provider)); it != by_provider_.end())
        for (auto i : it->second) out.push_back(offers_[i]);
    return out;
}

std::vector<std::string> Catalog::providers() const {
    std::vector<std::string> out;
    for (const auto& [name, _] : by_provider_) out.push_back(name);
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<Offer> Catalog::select(const SelectionRequest& request,
                                   std::string_view provider) const {
    if (provider.empty()) return matching_offers(offers_, request);
    return matching_offers(offers(provider), request);
}

void Catalog::merge(std::vector<Offer> live) {
    using Key = std::tuple<std::string, std::string, std::string>;
    auto key = [](const Offer& o) {
        return Key{detail::to_lower(o.provider), o.instance_type, detail::to_lower(o.region)};
    };
    std::map<Key, std::size_t> where;
    for (std::size_t i = 0; i < offers_.size(); ++i) where.emplace(key(offers_[i]), i);
    for (auto& o : live) {
        if (!o.accelerator.empty())
            if (auto c = detail::canonical_accelerator_name(o.accelerator)) o.accelerator = *c;
        const auto k = key(o);
        if (auto it = where.find(k); it != where.end()) {
            offers_[it->second] = std::move(o);
        } else {
            where.emplace(k, offers_.size());
            offers_.push_back(std::move(o));
        }
    }
    reindex();
}

}  // namespace sky::inline v0
