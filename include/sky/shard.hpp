#pragma once
/// \file Splitting data across nodes (docs/api.md §10): every node takes its own disjoint part.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "sky/detail/ranges.hpp"
#include "sky/errors.hpp"
#include "sky/export.hpp"
#include "sky/instance.hpp"

SKY_PUBLIC_BEGIN

/// How to shard: shuffle first (with a seed all nodes share) or keep the order.
struct ShardOptions {
    bool shuffle = false;
    std::optional<std::uint64_t> seed;  ///< same seed on every node gives the same permutation
    /// Node index and node count; taken from instance_info() when unset.
    std::optional<int> node;
    std::optional<int> total_nodes;
};

namespace detail {

/// A deterministic Fisher-Yates permutation of [0, n) (std::shuffle's algorithm is not
/// specified, and the nodes must agree). In libsky (src/runtime/shard.cpp), with its <random>.
std::vector<std::size_t> permutation(std::size_t n, bool shuffle, std::uint64_t seed);

/// This node's indices: a contiguous block of the (maybe shuffled) order; blocks differ in size
/// by at most one and cover every index once. Throws ConfigError for a node not in the pool.
std::vector<std::size_t> shard_indices(std::size_t n, const ShardOptions& o);

template <class R>
auto take(const R& r, const std::vector<std::size_t>& idx) {
    using T = detail::ranges::range_value_t<R>;
    std::vector<T> out;
    out.reserve(idx.size());
    auto first = std::ranges::begin(r);
    for (std::size_t i : idx) out.push_back(first[static_cast<std::ptrdiff_t>(i)]);
    return out;
}

}  // namespace detail

/// A sized random-access range (std::vector, std::span, C arrays, ...).
template <class R>
concept shardable =
    detail::ranges::random_access_range<const R> && detail::ranges::sized_range<const R>;

/// This node's part of `data` as a std::vector.
template <shardable R>
auto shard(const R& data, const ShardOptions& o = {}) {
    return detail::take(data, detail::shard_indices(std::ranges::size(data), o));
}

/// The same indices of each array: `auto [x, y] = sky::shard(x_full, y_full, {.shuffle = true})`.
template <shardable R1, shardable R2, shardable... Rs>
auto shard(const R1& a, const R2& b, const Rs&... rest) {
    auto n = std::ranges::size(a);
    if (std::ranges::size(b) != n || ((std::ranges::size(rest) != n) || ...))
        throw ConfigError("sky::shard: the arrays have different sizes");
    auto idx = detail::shard_indices(n, {});
    return std::make_tuple(detail::take(a, idx), detail::take(b, idx), detail::take(rest, idx)...);
}
template <shardable R1, shardable R2>
auto shard(const R1& a, const R2& b, const ShardOptions& o) {
    if (std::ranges::size(b) != std::ranges::size(a))
        throw ConfigError("sky::shard: the arrays have different sizes");
    auto idx = detail::shard_indices(std::ranges::size(a), o);
    return std::make_tuple(detail::take(a, idx), detail::take(b, idx));
}
template <shardable R1, shardable R2, shardable R3>
auto shard(const R1& a, const R2& b, const R3& c, const ShardOptions& o) {
    auto n = std::ranges::size(a);
    if (std::ranges::size(b) != n || std::ranges::size(c) != n)
        throw ConfigError("sky::shard: the arrays have different sizes");
    auto idx = detail::shard_indices(n, o);
    return std::make_tuple(detail::take(a, idx), detail::take(b, idx), detail::take(c, idx));
}

/// Options of DistributedSampler.
struct SamplerOptions {
    bool shuffle = true;
    std::uint64_t seed = 0;
    std::optional<int> node;  ///< defaults to instance_info()
    std::optional<int> total_nodes;
};

/// This node's sample indices for each epoch, like PyTorch's DistributedSampler: strided over
/// a permutation that changes with set_epoch(); disjoint across nodes, covering every index once
/// (no padding, so node counts differ by at most one).
class DistributedSampler {
public:
    DistributedSampler(std::size_t dataset_size, SamplerOptions o = {});
    /// Reshuffles for `epoch` (same permutation on every node for the same epoch).
    void set_epoch(std::uint64_t epoch) {
        epoch_ = epoch;
        rebuild();
    }
    [[nodiscard]] std::size_t size() const noexcept { return indices_.size(); }
    [[nodiscard]] auto begin() const noexcept { return indices_.begin(); }
    [[nodiscard]] auto end() const noexcept { return indices_.end(); }
    [[nodiscard]] const std::vector<std::size_t>& indices() const noexcept { return indices_; }

private:
    void rebuild();
    std::size_t size_;
    SamplerOptions opts_;
    int node_ = 0;
    int total_ = 1;
    std::uint64_t epoch_ = 0;
    std::vector<std::size_t> indices_;
};

SKY_PUBLIC_END
