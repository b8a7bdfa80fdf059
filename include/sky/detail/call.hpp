#pragma once
// What travels from the front to the pool: a call description, and the shared state a batch of
// calls completes into.
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sky/detail/buffer.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/distributed.hpp"
#include "sky/errors.hpp"
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

namespace detail {

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

    // Out of line (src/runtime/call_desc.cpp): every call makes, moves and destroys one, and
    // their shared pointers, optional and strings are then not compiled in each program.
    CallDesc() noexcept;
    CallDesc(const CallDesc&);
    CallDesc(CallDesc&&) noexcept;
    CallDesc& operator=(const CallDesc&);
    CallDesc& operator=(CallDesc&&) noexcept;
    ~CallDesc();
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

/// A batch of calls in flight, shared by the pool (which completes its items) and the caller
/// (which waits for them, or is called back). Its synchronisation is compiled in libsky
/// (src/pool/batch_state.cpp), so this header holds no mutex or condition variable.
class BatchState {
public:
    explicit BatchState(std::size_t n);
    ~BatchState();
    BatchState(const BatchState&) = delete;
    BatchState& operator=(const BatchState&) = delete;

    /// Item `i` finished with a result (from the pool).
    void complete(std::size_t i, Buffer&& result, int node = -1, std::string instance_id = {},
                  std::vector<std::string> log_tail = {});
    /// Item `i` failed (from the pool).
    void fail(std::size_t i, std::exception_ptr e);
    /// Makes the batch `n` items, before any item finished (from the pool): a distributed call
    /// that woke an elastic pool learns its ranks once its nodes are ready.
    void grow(std::size_t n);
    /// Waits until every item finished. Throws sky::Error on one of sky's I/O threads (an
    /// asynchronous handler without an executor of its own): waiting there would stall the
    /// connections that deliver the results.
    void wait();
    /// Waits up to `d`; true when every item finished.
    template <class Rep, class Period>
    bool wait_for(std::chrono::duration<Rep, Period> d) {
        // A day at a time: a long wait (hours::max()) never overflows in nanoseconds.
        constexpr std::chrono::hours day{24};
        std::common_type_t<std::chrono::duration<Rep, Period>, std::chrono::hours> left = d;
        for (; left > day; left -= day)
            if (wait_for_ns(day)) return true;
        return wait_for_ns(std::chrono::ceil<std::chrono::nanoseconds>(left));
    }
    /// True when every item finished.
    [[nodiscard]] bool ready() const noexcept;
    /// Waits for the next item to finish and sets `index` to it, in the order items finish
    /// (pool.as_completed); false once every item has been taken. For one consumer.
    bool next_finished(std::size_t& index);
    /// The first failure in input order, if any.
    [[nodiscard]] std::exception_ptr first_error() const;
    /// Calls `hook` once, when every item has finished: at once on this thread when they
    /// have, else on the thread that finishes the last one (often one of sky's I/O threads, so
    /// the hook must not block). The asynchronous forms (sky/asio.hpp) complete through it.
    void on_finished(std::function<void()> hook);

    std::vector<Outcome> outcomes;
    /// Set by the pool: cancels what has not finished; returns true when something was cancelled.
    std::function<bool()> cancel;

private:
    bool wait_for_ns(std::chrono::nanoseconds d);
    void finish_one(std::size_t i);
    struct Sync;
    std::unique_ptr<Sync> sync_;
};

/// A new, empty Buffer for a call's arguments (made in libsky: the shared pointer's control
/// block is not compiled in every translation unit that makes a call).
std::shared_ptr<Buffer> make_shared_buffer();

/// Throws ProtocolError("<what> could not be decoded: <e.what()>") (out of line: the message is
/// built in libsky, not in every call's instantiation).
[[noreturn]] void throw_undecodable(const char* what, const std::exception& e);

/// Decodes one outcome as R (rethrowing its error). Result bytes that do not decode as R (a
/// broken or hostile worker) are a ProtocolError, never an allocation their sizes ask for.
template <class R>
R take(const Outcome& o) {
    if (o.error) std::rethrow_exception(o.error);
    if constexpr (!std::is_void_v<R>) {
        R r{};
        try {
            load_each(o.result.span(), r);
        } catch (const std::runtime_error& e) {  // cereal::Exception, or a user type's load()
            throw_undecodable("a result from the worker", e);
        }
        return r;
    }
}

}  // namespace detail

SKY_PUBLIC_END
