#pragma once
// What `sky ls` and `sky gc` share: the pools in this machine's ledger, and the machines each
// cloud provider with credentials has under sky's tag.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/ledger.hpp"
#include "providers/registry/registry.hpp"
#include "sky/cloud.hpp"

namespace sky::cli {

/// One provider's answer to "which sky machines do you have".
struct TaggedMachines {
    std::string provider;
    std::string region;                   ///< the adapter's region ("" where the cloud places)
    std::vector<CloudInstance> machines;  ///< not gone
    std::string error;                    ///< set when the provider could not be asked
    bool unconfigured = false;  ///< error is the adapter's ConfigError (no credentials, ...)
};

/// The providers to ask for machines: those that list any whose credentials are set (all of
/// them, or only `only` when given). `not_asked` gets "name (why)" for each one left out.
std::vector<const detail::ProviderDescriptor*> listing_providers(
    const std::optional<std::string>& only, std::vector<std::string>* not_asked);

/// Asks one provider for every sky machine it has; never throws (the error is in the result).
TaggedMachines list_tagged(const detail::ProviderDescriptor& d,
                           const detail::MachineQuery& query = {});

/// "running", "owner gone", "closed, 2 left", "on host X": what the ledger says of a pool.
std::string pool_state(const detail::LedgerRecord& r);

/// Seconds since the epoch as "2024-05-01T12:00:01Z" ("-" for 0).
std::string utc(std::int64_t unix_seconds);

/// "a, b, c" (at most `max` items, then "+N more").
std::string join(const std::vector<std::string>& items, std::size_t max = 8);

/// The state's word as `sky ls` prints it.
std::string_view state_name(CloudInstance::State s);

/// Prints rows as columns two spaces apart, trailing blanks removed, escapes neutralized. A cell
/// longer than `max_cell` (0: no limit) wraps onto the lines below, within its column.
void print_table(const std::vector<std::vector<std::string>>& rows, std::size_t max_cell = 0);

}  // namespace sky::cli
