#pragma once
// What `sky ls` and `sky gc` do with a cloud, through its adapter alone: list the machines under
// sky's tag, and collect pools that no longer run (terminate and confirm their machines, delete
// their infrastructure, close their ledgers). Every cloud's descriptor gets these from here.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// A provider's machine inventory with the default configuration from the environment, in
/// `region` ("": the default).
using InventoryFactory = std::function<std::unique_ptr<MachineInventory>(std::string_view region)>;

/// Sets `d.list_machines` and `d.collect` from `make`: what `sky ls` and `sky gc` need of a
/// provider whose machines are not launched by the cloud layer (Slurm's jobs); keeps a
/// `list_machines` the descriptor already has.
void add_cloud_gc(ProviderDescriptor& d, InventoryFactory make);

/// The same from `d.make_adapter` (which must be set): a cloud's adapter is its inventory.
void add_cloud_gc(ProviderDescriptor& d);

/// Removes the client-side key directories of a pool ("sky-<provider>-<pool id>-XXXXXX" in the
/// temporary directory, 0700, the pool's SSH private key) that a killed client left: only this
/// user's directories, never through a symbolic link.
void remove_key_directories(const std::string& pool_id) noexcept;

}  // namespace sky::detail
