// shard() and DistributedSampler: disjoint, covering, aligned across arrays, deterministic.
#include <array>
#include <catch2/catch.hpp>
#include <numeric>
#include <set>
#include <span>
#include <vector>

#include "sky/shard.hpp"

TEST_CASE("shards are disjoint and cover every element once", "[shard]") {
    for (int total : {1, 2, 3, 7}) {
        for (std::size_t n : {0u, 1u, 5u, 100u, 101u}) {
            for (bool shuffle : {false, true}) {
                std::vector<int> data(n);
                std::iota(data.begin(), data.end(), 0);
                std::multiset<int> seen;
                std::size_t biggest = 0, smallest = n;
                for (int node = 0; node < total; ++node) {
                    auto part = sky::shard(
                        data, {.shuffle = shuffle, .seed = 42, .node = node, .total_nodes = total});
                    seen.insert(part.begin(), part.end());
                    biggest = std::max(biggest, part.size());
                    smallest = std::min(smallest, part.size());
                }
                CHECK(seen.size() == n);
                CHECK(std::set<int>(seen.begin(), seen.end()).size() == n);
                CHECK(biggest - smallest <= 1);
            }
        }
    }
}

TEST_CASE("several arrays get the same indices", "[shard]") {
    std::vector<int> x(50);
    std::iota(x.begin(), x.end(), 0);
    std::vector<double> y(50);
    for (int i = 0; i < 50; ++i) y[static_cast<std::size_t>(i)] = i * 10.0;
    for (int node = 0; node < 3; ++node) {
        auto [xs, ys] =
            sky::shard(x, y, {.shuffle = true, .seed = 7, .node = node, .total_nodes = 3});
        REQUIRE(xs.size() == ys.size());
        for (std::size_t i = 0; i < xs.size(); ++i) CHECK(ys[i] == xs[i] * 10.0);
    }
    std::vector<int> z(49);
    CHECK_THROWS_AS(sky::shard(x, z, sky::ShardOptions{}), sky::ConfigError);
}

TEST_CASE("shuffle is deterministic by seed and differs across seeds", "[shard]") {
    std::vector<int> d(100);
    std::iota(d.begin(), d.end(), 0);
    auto a = sky::shard(d, {.shuffle = true, .seed = 1, .node = 0, .total_nodes = 2});
    auto b = sky::shard(d, {.shuffle = true, .seed = 1, .node = 0, .total_nodes = 2});
    auto c = sky::shard(d, {.shuffle = true, .seed = 2, .node = 0, .total_nodes = 2});
    CHECK(a == b);
    CHECK(a != c);
    auto plain = sky::shard(d, {.node = 1, .total_nodes = 2});
    CHECK(plain.front() == 50);
    CHECK(plain.back() == 99);
}

TEST_CASE("shard takes spans and arrays, outside a worker it is the whole range", "[shard]") {
    std::array<int, 4> arr{1, 2, 3, 4};
    CHECK(sky::shard(arr) == std::vector<int>{1, 2, 3, 4});
    std::vector<int> v{5, 6, 7};
    CHECK(sky::shard(std::span<const int>(v)) == v);
    CHECK_THROWS_AS(sky::shard(v, {.node = 3, .total_nodes = 2}), sky::ConfigError);
}

TEST_CASE("DistributedSampler covers the dataset each epoch and reshuffles", "[shard]") {
    const std::size_t n = 103;
    std::vector<std::vector<std::size_t>> epoch0, epoch1;
    for (int node = 0; node < 4; ++node) {
        sky::DistributedSampler s{n, {.shuffle = true, .seed = 3, .node = node, .total_nodes = 4}};
        epoch0.emplace_back(s.begin(), s.end());
        s.set_epoch(1);
        epoch1.emplace_back(s.begin(), s.end());
    }
    for (auto* e : {&epoch0, &epoch1}) {
        std::set<std::size_t> all;
        std::size_t count = 0;
        for (auto& part : *e) {
            all.insert(part.begin(), part.end());
            count += part.size();
        }
        CHECK(all.size() == n);
        CHECK(count == n);
    }
    CHECK(epoch0[0] != epoch1[0]);
}
