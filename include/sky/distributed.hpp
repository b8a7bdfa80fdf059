#pragma once
/// \file Distributed-training plugins (docs/api.md §11): `p.with(sky::distributed::torch{})`.
///
/// A plugin names the framework whose rendezvous environment the worker sets while the call
/// runs (and only then): node 0 is the head at its private address, every worker process of
/// every node is one rank. A broadcast (`|`) of a call with a plugin runs once per rank, results
/// in rank order. See docs/distributed.md for the variables of each plugin.
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

namespace detail {
/// What travels with a call: which plugin (0 = none) and its backend.
struct PluginSpec {
    enum Kind : std::uint8_t {
        none = 0,
        torch = 1,
        jax = 2,
        tensorflow = 3,
        keras = 4,
        transformers = 5
    };
    std::uint8_t kind = none;
    std::string backend;  ///< torch/transformers: "nccl", "gloo", ...; keras: "jax", ...

    friend bool operator==(const PluginSpec&, const PluginSpec&) = default;
};
/// Checks a plugin's backend and returns its wire form; throws sky::ConfigError naming the
/// plugin and the accepted values.
PluginSpec make_plugin(PluginSpec::Kind kind, std::string_view backend);
}  // namespace detail

namespace distributed {

/// PyTorch (libtorch c10d, torchrun's variables): MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
/// LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME.
struct torch {
    std::string backend = "nccl";  ///< "nccl", "gloo", "mpi" or "ucc" (SKY_DISTRIBUTED_BACKEND)
};
/// JAX: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID.
struct jax {};
/// TensorFlow: TF_CONFIG with one worker per rank.
struct tensorflow {};
/// Keras 3: KERAS_BACKEND plus that backend's variables (jax, torch or tensorflow above).
struct keras {
    std::string backend = "jax";  ///< "jax", "torch" or "tensorflow"
};
/// Hugging Face Transformers / Accelerate: the torch variables.
struct transformers {
    std::string backend = "nccl";  ///< as torch::backend
};

}  // namespace distributed

namespace detail {
inline PluginSpec plugin_spec(const distributed::torch& p) {
    return make_plugin(PluginSpec::torch, p.backend);
}
inline PluginSpec plugin_spec(const distributed::jax&) { return make_plugin(PluginSpec::jax, {}); }
inline PluginSpec plugin_spec(const distributed::tensorflow&) {
    return make_plugin(PluginSpec::tensorflow, {});
}
inline PluginSpec plugin_spec(const distributed::keras& p) {
    return make_plugin(PluginSpec::keras, p.backend);
}
inline PluginSpec plugin_spec(const distributed::transformers& p) {
    return make_plugin(PluginSpec::transformers, p.backend);
}
/// The plugin types `.with()` accepts, and nothing else.
template <class P>
concept distributed_plugin = requires(const P& p) {
    { plugin_spec(p) } -> std::same_as<PluginSpec>;
};
}  // namespace detail

SKY_PUBLIC_END
