#include "runtime/worker/core.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "runtime/worker_context.hpp"

namespace sky::detail {

void WorkerCore::say(const std::string& msg) const {
    std::string line =
        fmt::format("sky worker {} (node {}): {}\n", ::getpid(), worker_instance().node, msg);
    (void)!::write(err_fd, line.data(), line.size());
}

}  // namespace sky::detail
