#pragma once
// Delivers a pool's events in order on a thread of their own, so handlers never stall the
// connections: display first, then PoolSpec::on_event, pool.on<E>() handlers, use_callback().
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "pool/display.hpp"
#include "sky/events.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// Bound on events returned by handlers that are dispatched in turn (a handler that answers
/// every event with another must not loop forever).
inline constexpr int max_event_depth = 8;

/// Sends an event to the use_callback() stack.
void dispatch_global(const Event& event, int depth);

class EventBus {
public:
    /// `running` reports the calls running per node, for the live display.
    EventBus(Display display, Callback on_event, std::function<std::vector<int>()> running = {});
    ~EventBus();
    void post(Event e);
    void add_handler(std::function<void(const Event&)> h);
    /// Delivers what is queued, then stops the thread.
    void stop();

private:
    void run();
    void deliver(const Event& e, int depth);

    Display display_;
    DisplayRenderer renderer_;
    std::function<std::vector<int>()> running_;
    Callback on_event_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Event> queue_;
    std::vector<std::function<void(const Event&)>> handlers_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace sky::detail
