#pragma once
// What the elastic tests run remotely, and what they record of a pool.
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sky/sky.hpp"
#include "support/proc_file.hpp"

namespace elastic_test {

/// Sleeps `ms`, then returns the node it ran on.
inline int node_after(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}

/// The rank this call is in a distributed call: "node rank world node_rank master_port" (torch's
/// variables), or what is missing.
inline std::string torch_rank() {
    auto get = [](const char* k) {
        const char* v = std::getenv(k);
        return std::string(v ? v : "-");
    };
    return std::to_string(sky::instance_info().node) + " " + get("RANK") + " " + get("WORLD_SIZE") +
           " " + get("NODE_RANK") + " " + get("MASTER_PORT");
}

/// TF_CONFIG's worker list and task index: "entries index", or "-" when it is not set.
inline std::string tf_rank() {
    const char* v = std::getenv("TF_CONFIG");
    if (!v) return "-";
    const auto tf = nlohmann::json::parse(v);
    return std::to_string(tf["cluster"]["worker"].size()) + " " +
           std::to_string(tf["task"]["index"].get<int>());
}

/// Every event of a pool with the time it arrived.
struct Recorder {
    using Clock = std::chrono::steady_clock;
    std::mutex m;
    std::vector<std::pair<Clock::time_point, sky::Event>> events;
    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            events.emplace_back(Clock::now(), e);
            return std::nullopt;
        };
    }
    template <class E>
    std::vector<E> all() {
        std::lock_guard lk(m);
        std::vector<E> v;
        for (auto& [t, e] : events)
            if (auto* x = std::get_if<E>(&e)) v.push_back(*x);
        return v;
    }
    bool error_with(const std::string& text) {
        for (auto& e : all<sky::ErrorEvent>())
            if (e.message.find(text) != std::string::npos) return true;
        return false;
    }
};

/// Worker processes of this test process (zombies included).
inline int children() { return sky::test::count_children(/*zombies=*/true); }

/// Polls `ok` every 20 ms until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& ok, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (ok()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ok();
}

/// The display: quiet unless ELASTIC_LOG is set.
inline sky::Display display() {
    return std::getenv("ELASTIC_LOG") ? sky::Display::log : sky::Display::quiet;
}

}  // namespace elastic_test
