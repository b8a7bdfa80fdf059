#pragma once
// The worker side of the runtime: serve calls over one transport until told to stop.
#include <chrono>
#include <string>
#include <string_view>

namespace sky::detail {

struct WorkerLaunch;

/// Command-line flag that turns a sky program into a worker.
inline constexpr const char* worker_flag = "--sky-worker";

/// Serves calls on the connected, already authenticated descriptor `fd`, started as `launch`
/// says (its client's pid, its heartbeat file); returns the process exit code.
int run_worker(int fd, const WorkerLaunch& launch);

/// Listens on `where` and returns the first connection that authenticates with `token` (the
/// challenge-response of runtime/auth.hpp); -1 when none did within `timeout`. Peers that fail
/// are dropped and accepting goes on. Remote workers use this.
/// - "HOST:PORT": IPv4 TCP (port 0: any); `port_file` gets the port.
/// - "unix:/absolute/path": a Unix socket created 0600 (the caller makes its directory 0700);
///   `port_file` gets "unix". The socket file is removed before this returns.
/// `port_file` (if not empty) is written once listening, whole (renamed into place).
int listen_and_accept(const std::string& where, const std::string& port_file,
                      std::chrono::seconds timeout, std::string_view token);

/// argv[0] as sky::init saw it (workers get the same).
const std::string& program_name();

/// Whether sky::init ran in this process (a pool refuses to start without it).
bool initialised() noexcept;

}  // namespace sky::detail
