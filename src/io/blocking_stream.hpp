#pragma once
// A blocking runtime Transport over an io::Stream, for callers that read and write on a thread of
// their own (tests, benchmarks, the pool until it reads io::Streams itself). Reads go ahead of the
// caller into two 256 KiB slots (the next read starts from the last one's completion); a write
// the stream takes at once (try_write_some) returns without waiting, a larger one waits for its
// completions. It must never run on a thread of the I/O core, whose handlers would then have
// nobody to run them.
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "io/stream.hpp"
#include "io/transport.hpp"

namespace sky::detail::io {

/// Throws std::logic_error naming `what` when called on a thread of the I/O core: a blocking
/// wait there could wait for a handler that the same threads must run.
void forbid_blocking_on_io_thread(std::string_view what);

class BlockingStream final : public sky::detail::Transport {
public:
    /// Turns a failed operation into the caller's exception: the error, the stream's failure()
    /// text (may be empty) and its describe(). It throws; when it returns instead, the stream
    /// throws sky::Error naming the stream and the reason.
    using Raise = std::function<void(const boost::system::error_code& error,
                                     const std::string& failure, const std::string& describe)>;

    /// Takes the stream; `raise` maps the stream's own errors (none: sky::Error for all).
    explicit BlockingStream(std::unique_ptr<Stream> stream, Raise raise = {});
    /// Closes the stream; an operation still in flight completes on the core without us.
    ~BlockingStream() override;
    BlockingStream(const BlockingStream&) = delete;
    BlockingStream& operator=(const BlockingStream&) = delete;

    /// Waits for at least one byte; 0 at the end of the stream or after shutdown().
    std::size_t read_some(std::span<std::byte> buf) override;
    /// Waits until every byte is written.
    void write_all(std::span<const std::span<const std::byte>> bufs) override;
    /// Closes the stream (any thread): a blocked read returns 0, a blocked write throws.
    void shutdown() noexcept override;
    /// Waits for data (kept for the next read_some) or the end; false after `timeout`.
    bool wait_readable(std::chrono::milliseconds timeout) override;
    [[nodiscard]] std::string describe() const override;

    struct State;

private:
    [[noreturn]] void fail(const boost::system::error_code& error, const char* doing) const;

    std::shared_ptr<State> state_;
    Raise raise_;
    std::string describe_;
};

}  // namespace sky::detail::io
