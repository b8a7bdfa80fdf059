#pragma once
// Internal: accelerator name canonicalisation shared by parsing, selection and device detection.
#include <optional>
#include <sky/accelerator.hpp>
#include <string>
#include <string_view>

namespace sky::detail {

/// The canonical model name for any accepted spelling ("a100-80gb" -> "A100", "TPU-v5p-8" keeps
/// its slice); none when the name is unknown. Never throws.
std::optional<std::string> canonical_accelerator_name(std::string_view name);

/// The accelerator a device reports itself as, e.g. nvidia-smi's "NVIDIA H100 80GB HBM3" with
/// 81559 MiB, or "Tesla V100-SXM2-16GB": the known model named in it, the memory variant nearest
/// `memory_mib` (ignored when 0), and `count`. None when no known model is named.
std::optional<Accelerator> accelerator_from_device_name(std::string_view device_name,
                                                        double memory_mib, int count);

}  // namespace sky::detail
