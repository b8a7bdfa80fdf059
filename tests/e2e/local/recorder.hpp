#pragma once
// Every event a pool (or sky::emit) delivered to a callback, in the order it arrived, with the
// time it arrived; and bounded waits for one that has not arrived yet.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sky/sky.hpp"

namespace e2e {

struct Recorder {
    using Clock = std::chrono::steady_clock;
    struct Seen {
        sky::Event event;
        Clock::time_point at;
    };
    std::mutex m;
    std::condition_variable cv;
    std::vector<Seen> seen;

    void add(const sky::Event& e) {
        {
            std::lock_guard lk(m);
            seen.push_back({e, Clock::now()});
        }
        cv.notify_all();
    }
    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            add(e);
            return std::nullopt;
        };
    }
    /// A copy of what arrived so far.
    std::vector<Seen> all() {
        std::lock_guard lk(m);
        return seen;
    }
    /// Waits up to `bound` for an event that `pred` accepts; true when one arrived.
    bool wait_for(const std::function<bool(const sky::Event&)>& pred,
                  std::chrono::milliseconds bound = std::chrono::seconds(20)) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, bound, [&] {
            for (auto& s : seen)
                if (pred(s.event)) return true;
            return false;
        });
    }
    /// The first time an event `pred` accepts arrived, if one did.
    std::optional<Clock::time_point> first(const std::function<bool(const sky::Event&)>& pred) {
        std::lock_guard lk(m);
        for (auto& s : seen)
            if (pred(s.event)) return s.at;
        return std::nullopt;
    }
    /// The steps of every BootstrapProgress of `instance_id`, in order.
    std::vector<std::string> steps(const std::string& instance_id) {
        std::lock_guard lk(m);
        std::vector<std::string> out;
        for (auto& s : seen)
            if (auto* p = std::get_if<sky::BootstrapProgress>(&s.event);
                p && p->instance_id == instance_id)
                out.push_back(p->step);
        return out;
    }
};

/// An ErrorEvent whose message is `text`.
inline std::function<bool(const sky::Event&)> error_saying(std::string text) {
    return [text = std::move(text)](const sky::Event& e) {
        auto* x = std::get_if<sky::ErrorEvent>(&e);
        return x && x->message == text;
    };
}

}  // namespace e2e
