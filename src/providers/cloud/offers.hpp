#pragma once
// Which offers a cloud pool chooses from: what the cloud lists now wins over the embedded
// catalog, which only fills in what a live offer leaves out.
#include <string_view>
#include <vector>

#include "sky/catalog.hpp"

namespace sky::detail {

/// The candidates of a pool on `provider`. When `live` (the adapter's live_offers) is not empty,
/// only its offers: each completed from the embedded catalog's row with the same instance type
/// (same region first) where the cloud left a fact out (accelerator, vCPUs, memory) or gave no
/// price. Empty `live`: the cloud could not be asked, the catalog's rows are the candidates.
[[nodiscard]] Catalog pool_offers(const Catalog& embedded, std::vector<Offer> live,
                                  std::string_view provider);

}  // namespace sky::detail
