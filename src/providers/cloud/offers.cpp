// Live offers win: a catalog row the cloud does not list is never tried (a type the cloud
// retired, renamed or does not sell in this account answers "unknown instance type").
#include "providers/cloud/offers.hpp"

#include "util/text.hpp"

namespace sky::detail {

namespace {

// The catalog row that names the same machine: same type and region, else same type anywhere.
const Offer* catalog_row(const std::vector<Offer>& rows, const Offer& o) {
    const Offer* any = nullptr;
    for (const auto& r : rows) {
        if (r.instance_type != o.instance_type) continue;
        if (iequals(r.region, o.region)) return &r;
        if (!any) any = &r;
    }
    return any;
}

void complete(Offer& o, const Offer& row) {
    if (o.accelerator.empty() && !row.accelerator.empty()) {
        o.accelerator = row.accelerator;
        if (o.accelerator_count <= 0) o.accelerator_count = row.accelerator_count;
        if (o.gpu_memory_gb <= 0) o.gpu_memory_gb = row.gpu_memory_gb;
    }
    if (o.vcpus <= 0) o.vcpus = row.vcpus;
    if (o.memory_gb <= 0) o.memory_gb = row.memory_gb;
    if (o.on_demand_price <= 0 && row.on_demand_price > 0) {
        o.on_demand_price = row.on_demand_price;
        o.prices_date = row.prices_date;
    }
    // A spot market the cloud confirms but prices nowhere: the catalog's dated price ranks it.
    if (o.spot_available && !o.spot_price && row.spot_price) o.spot_price = row.spot_price;
    if (o.prices_date.empty()) o.prices_date = row.prices_date;
}

}  // namespace

Catalog pool_offers(const Catalog& embedded, std::vector<Offer> live, std::string_view provider) {
    const std::vector<Offer> rows = embedded.offers(provider);
    if (live.empty()) return Catalog(rows);
    for (auto& o : live) {
        if (o.provider.empty()) o.provider = std::string(provider);
        if (const Offer* row = catalog_row(rows, o)) complete(o, *row);
    }
    return Catalog(std::move(live));
}

}  // namespace sky::detail
