#pragma once
// `sky ls` and `sky gc` for Slurm: sky's jobs as the cloud layer's machines. A ledger's
// instance id is a JobRef (login node, key, known hosts, job name and id), so a dead pool's job
// is found and cancelled with nothing but the ledger.
#include <memory>

#include "sky/cloud.hpp"

namespace sky::detail {

/// The machine inventory `sky ls` and `sky gc` use (Slurm launches no machine one by one, so it
/// is no CloudAdapter): describe() and terminate() take JobRef ids and reach each one's
/// cluster; list() asks the cluster of SKY_SLURM_LOGIN (with SKY_SLURM_IDENTITY_FILE and
/// SKY_SLURM_KNOWN_HOSTS), else this machine's Slurm when it has one, else nothing.
std::unique_ptr<MachineInventory> make_slurm_inventory();

}  // namespace sky::detail
