#pragma once
// Delivers a pool's events in order on a thread of their own, so handlers never stall the
// connections: display first, then PoolSpec::on_event, pool.on<E>() handlers, use_callback().
// Every live bus is also in a registry that sky::emit() posts to: an emitted event reaches each
// live pool's on_event and on<E>() handlers (not its display), on that pool's thread.
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

/// Calls the use_callback() stack (innermost first) with `event`; returns what they answered.
std::vector<Event> call_global(const Event& event);

/// sky::emit at `depth`: posts `event` to every live pool and calls the use_callback() stack;
/// answers are emitted in turn (up to max_event_depth).
void emit_everywhere(const Event& event, int depth);

class EventBus {
public:
    /// `running` reports the calls running per node, for the live display.
    EventBus(Display display, Callback on_event, std::function<std::vector<int>()> running = {});
    ~EventBus();
    /// Queues one of the pool's own events.
    void post(Event e);
    /// Queues an event from sky::emit (`depth`: how many answers deep it is).
    void post_emitted(const Event& e, int depth);
    void add_handler(std::function<void(const Event&)> h);
    /// Delivers what is queued, then stops the thread (and takes the bus off the registry).
    void stop();
    /// Whether the calling thread is the bus's own (a handler's): stop() cannot wait for it.
    [[nodiscard]] bool on_own_thread() const noexcept {
        return std::this_thread::get_id() == thread_.get_id();
    }

private:
    struct Queued {
        Event event;
        bool emitted = false;  // from sky::emit: not the pool's own
        int depth = 0;
    };
    void run();
    void deliver(const Event& e, int depth);
    void deliver_emitted(const Event& e, int depth);
    /// PoolSpec::on_event, then the on<E>() handlers; returns on_event's answer.
    std::optional<Event> call_handlers(const Event& e);

    Display display_;
    DisplayRenderer renderer_;
    std::function<std::vector<int>()> running_;
    Callback on_event_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Queued> queue_;
    std::vector<std::function<void(const Event&)>> handlers_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace sky::detail
