#include "pool/event_bus.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace sky::detail {

EventBus::EventBus(Display display, Callback on_event, std::function<std::vector<int>()> running)
    : display_(display),
      renderer_(display, stderr, ::isatty(2) == 1),
      running_(std::move(running)),
      on_event_(std::move(on_event)),
      thread_([this] { run(); }) {}

EventBus::~EventBus() { stop(); }

void EventBus::post(Event e) {
    {
        std::lock_guard lk(m_);
        if (stop_) return;
        queue_.push_back(std::move(e));
    }
    cv_.notify_one();
}

void EventBus::add_handler(std::function<void(const Event&)> h) {
    std::lock_guard lk(m_);
    handlers_.push_back(std::move(h));
}

void EventBus::stop() {
    {
        std::lock_guard lk(m_);
        stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EventBus::run() {
    for (;;) {
        std::deque<Event> batch;
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
        for (auto& e : batch) deliver(e, 0);
        if (display_ == Display::spinner && running_) renderer_.tick(running_());
    }
}

void EventBus::deliver(const Event& e, int depth) {
    renderer_.show(e);
    std::optional<Event> answer;
    if (on_event_) {
        try {
            answer = on_event_(e);
        } catch (...) {
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
    dispatch_global(e, depth);
    if (answer && depth < max_event_depth) deliver(*answer, depth + 1);
}

}  // namespace sky::detail
