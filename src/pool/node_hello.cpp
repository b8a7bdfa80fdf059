#include "pool/node_hello.hpp"

#include <cstdlib>

namespace sky::detail {

ClientHello node_hello(const PoolSpec& spec, const NodeHelloFacts& facts) {
    ClientHello ch;
    ch.pool_id = facts.pool_id;
    ch.instance_id = facts.instance.id;
    ch.node = facts.node;
    ch.total_nodes = spec.nodes;
    ch.concurrency = spec.concurrency;
    ch.head_addr = facts.head_addr;
    ch.head_port = 0;  // the head's port comes with the layout, once every node is ready
    ch.private_addr = facts.instance.private_ip.value_or(facts.instance.public_ip.value_or(""));
    if (spec.accelerator) {
        ch.accelerator = spec.accelerator->to_string();
        for (int k = 0; k < spec.accelerator->count; ++k)
            ch.accelerators.push_back(spec.accelerator->name);
    }
    ch.idle_timeout_s = spec.idle_timeout.count();
    ch.hard_timeout_s = spec.timeout.count();
    ch.collect_metrics = spec.collect_metrics;
    ch.session = facts.session;
    ch.resume = facts.resume;
    ch.reconnect_bound_s = facts.reconnect_wait.count();
    if (facts.env && !facts.resume)
        for (const auto& [k, v] : *facts.env) {
            ch.env_names.push_back(k);
            ch.env_values.push_back(v);
        }
    // SKY_METRICS_INTERVAL_MS shortens the sampling interval (tests, dashboards).
    if (const char* iv = std::getenv("SKY_METRICS_INTERVAL_MS"))
        ch.metrics_interval_ms = std::atoll(iv);
    return ch;
}

}  // namespace sky::detail
