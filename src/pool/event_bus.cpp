#include "pool/event_bus.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace sky::detail {

EventBus::EventBus(Display display, Callback on_event)
    : display_(display), on_event_(std::move(on_event)), thread_([this] { run(); }) {}

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
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty() && stop_) return;
            batch.swap(queue_);
        }
        for (auto& e : batch) deliver(e, 0);
    }
}

void EventBus::deliver(const Event& e, int depth) {
    show(e);
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

void EventBus::show(const Event& e) {
    if (display_ == Display::quiet) return;
    if (display_ == Display::spinner && std::holds_alternative<Metrics>(e)) return;
    std::string line;
    if (auto* l = std::get_if<LogLine>(&e))
        line = fmt::format("[node {}] {}\n", l->node, l->line);
    else if (std::holds_alternative<Metrics>(e))
        line = fmt::format("sky: {}\n", describe(e));
    else
        line = fmt::format("sky: {}\n", describe(e));
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

}  // namespace sky::detail
