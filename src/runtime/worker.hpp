#pragma once
// The worker side of the runtime: serve calls over one transport until told to stop.
#include <chrono>
#include <string>

namespace sky::detail {

/// Command-line flag that turns a sky program into a worker.
inline constexpr const char* worker_flag = "--sky-worker";

/// Serves calls on the connected descriptor `fd`; returns the process exit code.
int run_worker(int fd, const std::string& token, long parent_pid);

/// Listens on "HOST:PORT" (port 0: any, written to `port_file`), accepts one connection and
/// returns it; -1 when nobody connected within `timeout`. Remote workers use this.
int listen_and_accept(const std::string& where, const std::string& port_file,
                      std::chrono::seconds timeout);

/// argv[0] as sky::init saw it (workers get the same).
const std::string& program_name();

/// Whether sky::init ran in this process (a pool refuses to start without it).
bool initialised() noexcept;

}  // namespace sky::detail
