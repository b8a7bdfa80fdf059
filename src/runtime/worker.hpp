#pragma once
// The worker side of the runtime as the rest of sky sees it (its parts: runtime/worker/).
#include <string>

namespace sky::detail {

/// Command-line flag that turns a sky program into a worker.
inline constexpr const char* worker_flag = "--sky-worker";

/// argv[0] as sky::init saw it (workers get the same).
const std::string& program_name();

/// Whether sky::init ran in this process (a pool refuses to start without it).
bool initialised() noexcept;

}  // namespace sky::detail
