#pragma once
// What the simulated-cloud tests run remotely, and the helpers a test of a sky program needs.
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "sky/sky.hpp"

namespace simtest {

int add(int a, int b);
/// Sleeps `ms`, then returns the node it ran on.
int node_after(int ms);
/// sky::instance_info().accelerators where it runs.
std::vector<std::string> accelerators();

/// Every event of a pool, in order (PoolSpec::on_event).
struct Recorder {
    std::mutex m;
    std::vector<sky::Event> events;
    sky::Callback callback();
    template <class E>
    std::vector<E> all() {
        std::lock_guard lk(m);
        std::vector<E> v;
        for (auto& e : events)
            if (auto* x = std::get_if<E>(&e)) v.push_back(*x);
        return v;
    }
    /// The events' type names in order ("InstanceProvisioned", ...), for order checks.
    std::vector<std::string> names();
};

/// A quiet pool on a simulated cloud (SIMTEST_LOG=1 in the environment: the log display).
sky::PoolSpec simulated(sky::Simulated cloud, int nodes, Recorder& rec,
                        sky::Spot spot = sky::Spot::Always{});

/// Child processes of this test process (worker processes, zombies included).
int children();

/// Polls `ok` every 20 ms until it holds or `limit` passes.
bool eventually(const std::function<bool()>& ok, std::chrono::milliseconds limit);

/// Sets an environment variable for a scope.
struct ScopedEnv {
    std::string name;
    ScopedEnv(std::string n, const std::string& value);
    ~ScopedEnv();
};

/// A client that starts a simulated pool, writes its instance ids to `file` and waits to be
/// killed (the `sky gc` test).
int orphan_client(const char* file);

}  // namespace simtest
