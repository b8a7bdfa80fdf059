#pragma once
// What the asynchronous tests run remotely, and what they share.
#include <chrono>
#include <sky/asio.hpp>
#include <sky/sky.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace asynctest {

inline int inc(int x) { return x + 1; }
inline int add(int a, int b) { return a + b; }
inline std::string twice(std::string s) { return s + s; }
inline void nothing() {}
inline int fail(int x) { throw std::invalid_argument("no " + std::to_string(x)); }
int sleep_ms(int ms);          ///< sleeps, then returns ms
int node_index();              ///< sky::instance_info().node
void touch(std::string path);  ///< creates the file

/// A quiet Local pool of `nodes` nodes.
inline sky::PoolSpec local(int nodes, int concurrency = 1) {
    return {.nodes = nodes,
            .concurrency = concurrency,
            .display = sky::Display::quiet,
            .collect_metrics = false};
}

/// The threads of this process (/proc/self/task).
int threads();

}  // namespace asynctest
