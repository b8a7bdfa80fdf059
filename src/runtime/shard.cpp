// The non-template half of sky/shard.hpp: the permutation every node computes alike, and the
// node's block of it (out of the header, so that a user's translation unit needs no <random>).
#include "sky/shard.hpp"

#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "sky/instance.hpp"

namespace sky::inline v0 {

namespace detail {

std::vector<std::size_t> permutation(std::size_t n, bool shuffle, std::uint64_t seed) {
    std::vector<std::size_t> idx(n);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    if (shuffle && n > 1) {
        std::mt19937_64 rng(seed);
        for (std::size_t i = n - 1; i > 0; --i) {
            std::size_t j = static_cast<std::size_t>(rng() % (i + 1));
            std::swap(idx[i], idx[j]);
        }
    }
    return idx;
}

std::vector<std::size_t> shard_indices(std::size_t n, const ShardOptions& o) {
    InstanceInfo info = (o.node && o.total_nodes) ? InstanceInfo{} : instance_info();
    int node = o.node.value_or(info.node);
    int total = o.total_nodes.value_or(info.total_nodes);
    if (total < 1 || node < 0 || node >= total)
        throw ConfigError("sky::shard: node " + std::to_string(node) + " is not in [0, " +
                          std::to_string(total) + ")");
    auto perm = permutation(n, o.shuffle, o.seed.value_or(0));
    std::size_t b = n * static_cast<std::size_t>(node) / static_cast<std::size_t>(total);
    std::size_t e = n * static_cast<std::size_t>(node + 1) / static_cast<std::size_t>(total);
    return {perm.begin() + static_cast<std::ptrdiff_t>(b),
            perm.begin() + static_cast<std::ptrdiff_t>(e)};
}

}  // namespace detail

DistributedSampler::DistributedSampler(std::size_t dataset_size, SamplerOptions o)
    : size_(dataset_size), opts_(o) {
    InstanceInfo info = (o.node && o.total_nodes) ? InstanceInfo{} : instance_info();
    node_ = o.node.value_or(info.node);
    total_ = o.total_nodes.value_or(info.total_nodes);
    if (total_ < 1 || node_ < 0 || node_ >= total_)
        throw ConfigError("sky::DistributedSampler: node " + std::to_string(node_) +
                          " is not in [0, " + std::to_string(total_) + ")");
    rebuild();
}

void DistributedSampler::rebuild() {
    auto perm = detail::permutation(size_, opts_.shuffle, opts_.seed + epoch_);
    indices_.clear();
    for (std::size_t i = static_cast<std::size_t>(node_); i < size_;
         i += static_cast<std::size_t>(total_))
        indices_.push_back(perm[i]);
}

}  // namespace sky::inline v0
