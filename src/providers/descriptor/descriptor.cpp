#include "providers/descriptor/descriptor.hpp"

#include <fmt/format.h>

namespace sky::detail {

Exposure this_machine_exposure() {
    return Exposure::open_to_others(fmt::format(
        "this distributed call runs its ranks on this machine (every node is 127.0.0.1): {}: "
        "every other user of this machine can (docs/distributed.md)",
        rendezvous_services));
}

}  // namespace sky::detail
