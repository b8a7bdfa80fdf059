#include "runtime/worker/watchdog.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

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

void Background::start_notices(Outbox& out, std::string file, std::chrono::milliseconds period) {
    notices_ =
        std::thread([this, &out, file = std::move(file), period] { notices(out, file, period); });
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
    if (notices_.joinable()) notices_.join();
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

namespace sky::detail {

namespace {

// The notice file's text, at most 4 KiB; empty when it is absent or unreadable.
std::string read_notice_file(const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return {};
    std::string text(4096, '\0');
    std::size_t got = 0;
    while (got < text.size()) {
        const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    text.resize(got);
    return text;
}

}  // namespace

void Background::notices(Outbox& out, const std::string& file, std::chrono::milliseconds period) {
    // Again while it stands: a frame written while the connection was down was dropped.
    constexpr auto repeat = std::chrono::seconds(5);
    std::optional<NodeNotice> sent;
    std::chrono::steady_clock::time_point sent_at{};
    struct timespec seen {};  // the file's mtime when last read
    off_t seen_size = -1;
    for (;;) {
        if (stopped_within(period)) return;
        struct stat st {};
        if (::stat(file.c_str(), &st) != 0) continue;  // no notice (yet)
        const bool changed = st.st_mtim.tv_sec != seen.tv_sec ||
                             st.st_mtim.tv_nsec != seen.tv_nsec || st.st_size != seen_size;
        const auto now = std::chrono::steady_clock::now();
        if (!changed && !(sent && now - sent_at >= repeat)) continue;
        seen = st.st_mtim;
        seen_size = st.st_size;
        const auto n = parse_notice_file(read_notice_file(file));
        if (!n) continue;
        if (!sent || *sent != *n)
            core_.say(fmt::format("the provider warned this node: {}", n->reason));
        const Buffer payload = encode_notice(*n);
        try {
            out.append(MsgType::notice, 0, payload.span());
            out.flush();
        } catch (...) {
            return;
        }
        sent = *n;
        sent_at = now;
    }
}

}  // namespace sky::detail
