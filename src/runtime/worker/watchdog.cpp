#include "runtime/worker/watchdog.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "metrics/metrics.hpp"
#include "runtime/preemption.hpp"
#include "sky/detail/serialize.hpp"

namespace sky::detail {

void Background::start_watchdog(const Limits& limits) {
    watchdog_ = std::thread([this, limits] { watchdog(limits); });
}

void Background::start_metrics(Outbox& out, std::chrono::milliseconds interval) {
    metrics_ = std::thread([this, &out, interval] { metrics(out, interval); });
}

void Background::start_progress(Outbox& out, std::chrono::milliseconds period) {
    progress_ = std::thread([this, &out, period] { progress(out, period); });
}

bool Background::stopped_within(std::chrono::milliseconds d) {
    std::unique_lock lk(m_);
    return cv_.wait_for(lk, d, [this] { return stop_; });
}

void Background::stop() {
    {
        std::lock_guard lk(m_);
        stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (metrics_.joinable()) metrics_.join();
    if (progress_.joinable()) progress_.join();
}

void Background::watchdog(Limits limits) {
    const double start = steady_seconds();
    for (;;) {
        if (stopped_within(std::chrono::milliseconds(250))) return;
        if (limits.parent_pid > 0 && ::getppid() != limits.parent_pid) {
            core_.say("the client process is gone; exiting");
            ::_exit(0);
        }
        double now = steady_seconds();
        if (now - start > static_cast<double>(limits.hard_timeout.count())) {
            core_.say(
                fmt::format("hard timeout of {} s reached; exiting", limits.hard_timeout.count()));
            ::_exit(0);
        }
        // Running calls do not count as contact: the client heartbeats all through them, so
        // silence means it is gone (killed, cut off), and nobody waits for their results.
        if (now - core_.last_heard.load() > static_cast<double>(limits.idle_timeout.count())) {
            core_.say(fmt::format("no word from the client for {} s (idle timeout){}; exiting",
                                  limits.idle_timeout.count(),
                                  core_.running.load() > 0 ? ", calls abandoned" : ""));
            ::_exit(0);
        }
    }
}

void Background::metrics(Outbox& out, std::chrono::milliseconds interval) {
    MetricsSampler sampler;
    for (;;) {
        if (stopped_within(interval)) return;
        const Metrics s = sampler.sample();
        Buffer p;
        save_to(p, s);
        try {
            out.append(MsgType::metrics, 0, p.span());
            out.flush();
        } catch (...) {
            return;
        }
    }
}

}  // namespace sky::detail

namespace sky::detail {

void Background::progress(Outbox& out, std::chrono::milliseconds period) {
    std::uint64_t sent = 0;  // ProgressSnapshot::changes when last sent
    bool reported = false;   // the client holds a step from this worker
    for (;;) {
        // Often while calls run: the pool's checkpoint step is the highest step it has heard
        // of, so the less it lags behind the ranks, the fewer of them are past it at a notice.
        const auto wait = core_.running.load() > 0 || reported ? period : period * 10;
        if (stopped_within(wait)) return;
        const ProgressSnapshot s = progress_snapshot();
        Buffer f;
        if (s.changes != sent) {
            sent = s.changes;
            reported = true;
            append_progress_frame(f, s.step);
        } else if (reported && core_.running.load() == 0) {
            // The calls that reported are over: a later notice must not pick their step.
            reported = false;
            progress_cleared();
            append_progress_frame(f, std::nullopt);
        } else {
            continue;
        }
        try {
            out.frame(std::move(f), true);
        } catch (...) {
            return;
        }
    }
}

}  // namespace sky::detail
