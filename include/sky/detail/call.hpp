#pragma once
// What travels from the front to the pool: a call description, and the shared state a batch of
// calls completes into.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sky/detail/buffer.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/distributed.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

/// Per-call options (`.timeout()`, `.retries()`, `.with()`).
struct CallOptions {
    std::optional<std::chrono::milliseconds> timeout;
    int retries = 0;
    /// Retries re-run only calls that never started (PendingCompute::at_most_once()).
    bool at_most_once = false;
    PluginSpec plugin;  ///< a distributed-training plugin (kind none: no rendezvous variables)
};

/// An immutable call: function name + signature hash + encoded arguments + options.
struct CallDesc {
    std::string_view function;                      ///< points into static storage or `owned_name`
    std::shared_ptr<const std::string> owned_name;  ///< set when the name did not come from F
    std::uint64_t signature = 0;
    std::shared_ptr<const Buffer> args;
    CallOptions options;
};

/// The result of one call: encoded result bytes, or an exception. For a result, where it ran
/// and what it printed last (a map builds its elements' errors from them).
struct Outcome {
    Buffer result;
    std::exception_ptr error;
    int node = -1;
    std::string instance_id;
    std::vector<std::string> log_tail;
};

/// Shared by the pool (which completes items) and the caller (which waits).
class BatchState {
public:
    explicit BatchState(std::size_t n) : outcomes(n), remaining_(n) { finished_.reserve(n); }

    void complete(std::size_t i, Buffer&& result, int node = -1, std::string instance_id = {},
                  std::vector<std::string> log_tail = {}) {
        auto& o = outcomes[i];
        o.result = std::move(result);
        o.node = node;
        o.instance_id = std::move(instance_id);
        o.log_tail = std::move(log_tail);
        finish_one(i);
    }
    void fail(std::size_t i, std::exception_ptr e) {
        outcomes[i].error = std::move(e);
        finish_one(i);
    }
    void wait() {
        // A short spin first: a fast call answers within microseconds, and a futex sleep and
        // wake-up costs about as much as the call itself.
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
        for (int i = 0;; ++i) {
            if (done_.load(std::memory_order_acquire)) return;
            if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
        }
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return remaining_ == 0; });
    }
    template <class Rep, class Period>
    bool wait_for(std::chrono::duration<Rep, Period> d) {
        std::unique_lock lk(m_);
        return cv_.wait_for(lk, d, [&] { return remaining_ == 0; });
    }
    [[nodiscard]] bool ready() const noexcept { return done_.load(std::memory_order_acquire); }
    /// Waits for the next item to finish and sets `index` to it, in the order items finish
    /// (pool.as_completed); false once every item has been taken. For one consumer.
    bool next_finished(std::size_t& index) {
        std::unique_lock lk(m_);
        if (taken_ == outcomes.size()) return false;
        ++waiting_;
        cv_.wait(lk, [&] { return taken_ < finished_.size(); });
        --waiting_;
        index = finished_[taken_++];
        return true;
    }
    /// The first failure in input order, if any.
    [[nodiscard]] std::exception_ptr first_error() const {
        for (auto& o : outcomes)
            if (o.error) return o.error;
        return nullptr;
    }

    std::vector<Outcome> outcomes;
    /// Set by the pool: cancels what has not finished; returns true when something was cancelled.
    std::function<bool()> cancel;

private:
    void finish_one(std::size_t i) {
        std::lock_guard lk(m_);
        finished_.push_back(i);
        if (--remaining_ == 0) {
            done_.store(true, std::memory_order_release);
            cv_.notify_all();
        } else if (waiting_ > 0) {
            cv_.notify_all();
        }
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::size_t remaining_;
    std::atomic<bool> done_{false};
    std::vector<std::size_t> finished_;  ///< item indices in the order they finished
    std::size_t taken_ = 0;              ///< how many of them next_finished() handed out
    int waiting_ = 0;                    ///< next_finished() callers asleep
};

/// Decodes one outcome as R (rethrowing its error). Result bytes that do not decode as R (a
/// broken or hostile worker) are a ProtocolError, never an allocation their sizes ask for.
template <class R>
R take(const Outcome& o) {
    if (o.error) std::rethrow_exception(o.error);
    if constexpr (!std::is_void_v<R>) {
        R r{};
        try {
            load_each(o.result.span(), r);
        } catch (const cereal::Exception& e) {
            throw ProtocolError(std::string("a result from the worker could not be decoded: ") +
                                e.what());
        }
        return r;
    }
}

}  // namespace sky::detail
