#include "pool/exposure.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "sky/providers.hpp"

namespace sky::detail {

namespace {

constexpr const char* kServices =
    "the distributed framework's rendezvous services (PyTorch's TCPStore and gloo/NCCL, JAX's "
    "coordinator, TensorFlow's servers) authenticate nobody, and whoever connects to them can run "
    "code as the job's user";

}  // namespace

std::string distributed_exposure(const PoolSpec& spec) {
    const Provider& p = spec.provider;
    if (p.get<Local>() || p.get<Simulated>())
        return fmt::format(
            "this distributed call runs its ranks on this machine (every node is 127.0.0.1): {}: "
            "every other user of this machine can (docs/distributed.md)",
            kServices);
    if (const SSH* ssh = p.get<SSH>())
        return fmt::format(
            "this distributed call runs on your hosts {}, where sky opens and closes no port: {}: "
            "every other user of those hosts, and anyone who can reach them on their network, "
            "can (docs/distributed.md)",
            fmt::join(ssh->hosts, ", "), kServices);
    if (p.get<RunPod>() || p.get<VastAI>())
        return fmt::format(
            "{} nodes are containers on shared hosts that map only SSH: ranks on different "
            "nodes cannot reach each other, and {}: every other process of a node's container "
            "can (docs/distributed.md)",
            p.get<RunPod>() ? "RunPod" : "Vast.ai", kServices);
    if (p.get<CustomCloud>())
        return fmt::format(
            "sky cannot tell what admits connections to a custom cloud's machines: {}: make sure "
            "only the pool's own machines can reach them (docs/distributed.md)",
            kServices);
    return {};  // AWS, DigitalOcean, Verda: only the pool's own machines get through
}

void notice_distributed_exposure(const PoolSpec& spec, const std::function<void(Event)>& emit) {
    const std::string text = distributed_exposure(spec);
    if (text.empty()) return;
    std::fprintf(stderr, "sky: notice: %s\n", text.c_str());
    if (emit) emit(ErrorEvent{text, std::nullopt});
}

}  // namespace sky::detail
