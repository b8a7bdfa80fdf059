#include "pool/event_bus.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace sky::detail {

namespace {

// The buses of the live pools, for sky::emit. Never destroyed: a pool that outlives static
// destruction (a static pool, a detached thread) still finds it.
struct LiveBuses {
    std::mutex m;
    std::vector<EventBus*> list;
};
LiveBuses& live_buses() {
    static auto* l = new LiveBuses;
    return *l;
}

void unregister_bus(EventBus* b) {
    auto& l = live_buses();
    std::lock_guard lk(l.m);
    std::erase(l.list, b);
}

}  // namespace

void emit_everywhere(const Event& event, int depth) {
    {
        // post_emitted only queues: no handler runs under this lock, so a handler that emits
        // again cannot deadlock. A bus leaves the list (under the lock) before it stops.
        auto& l = live_buses();
        std::lock_guard lk(l.m);
        for (EventBus* b : l.list) b->post_emitted(event, depth);
    }
    for (auto& answer : call_global(event))
        if (depth < max_event_depth) emit_everywhere(answer, depth + 1);
}

EventBus::EventBus(Display display, Callback on_event, std::function<std::vector<int>()> running)
    : display_(display),
      renderer_(display, stderr, ::isatty(2) == 1),
      running_(std::move(running)),
      on_event_(std::move(on_event)),
      thread_([this] { run(); }) {
    auto& l = live_buses();
    std::lock_guard lk(l.m);
    l.list.push_back(this);
}

EventBus::~EventBus() { stop(); }

void EventBus::post(Event e) {
    {
        std::lock_guard lk(m_);
        if (stop_) return;
        queue_.push_back({std::move(e), false, 0});
    }
    cv_.notify_one();
}

void EventBus::post_emitted(const Event& e, int depth) {
    {
        std::lock_guard lk(m_);
        if (stop_) return;
        queue_.push_back({e, true, depth});
    }
    cv_.notify_one();
}

void EventBus::add_handler(std::function<void(const Event&)> h) {
    std::lock_guard lk(m_);
    handlers_.push_back(std::move(h));
}

void EventBus::stop() {
    unregister_bus(this);
    {
        std::lock_guard lk(m_);
        stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EventBus::run() {
    for (;;) {
        std::deque<Queued> batch;
        {
            std::unique_lock lk(m_);
            // The live display redraws ten times a second; otherwise wait for events.
            if (display_ == Display::spinner)
                cv_.wait_for(lk, std::chrono::milliseconds(100),
                             [&] { return stop_ || !queue_.empty(); });
            else
                cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty() && stop_) {
                renderer_.close();
                return;
            }
            batch.swap(queue_);
        }
        for (auto& q : batch) {
            if (q.emitted)
                deliver_emitted(q.event, q.depth);
            else
                deliver(q.event, 0);
        }
        if (display_ == Display::spinner && running_) renderer_.tick(running_());
    }
}

std::optional<Event> EventBus::call_handlers(const Event& e) {
    std::optional<Event> answer;
    if (on_event_) {
        try {
            answer = on_event_(e);
        } catch (...) {
            // A throwing handler must not take the pool down.
        }
    }
    std::vector<std::function<void(const Event&)>> hs;
    {
        std::lock_guard lk(m_);
        hs = handlers_;
    }
    for (auto& h : hs) {
        try {
            h(e);
        } catch (...) {
        }
    }
    return answer;
}

void EventBus::deliver(const Event& e, int depth) {
    renderer_.show(e);
    std::optional<Event> answer = call_handlers(e);
    std::vector<Event> answers = call_global(e);
    if (depth >= max_event_depth) return;
    // An answer to one of the pool's events is the pool's event in turn, whoever gave it.
    if (answer) deliver(*answer, depth + 1);
    for (auto& a : answers) deliver(a, depth + 1);
}

void EventBus::deliver_emitted(const Event& e, int depth) {
    // The display shows the pool's own events only (an emitted PoolStarted or CostFinal must
    // not rename the pool or end its live block); the use_callback() stack got it from emit().
    std::optional<Event> answer = call_handlers(e);
    // An answer to an emitted event is emitted in turn.
    if (answer && depth < max_event_depth) emit_everywhere(*answer, depth + 1);
}

}  // namespace sky::detail
