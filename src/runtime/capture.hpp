#pragma once
// Output capture in a worker: what a call writes to std::cout/std::cerr is attributed to that
// call exactly (a thread-aware streambuf); what reaches file descriptors 1 and 2 directly
// (printf, child processes) goes through pipes and is attributed to the call when only one runs.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <streambuf>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace sky::detail {

/// The call the current thread runs; holds the tail of its output for error reports.
struct CallContext {
    std::uint64_t call_id = 0;
    std::mutex m;  // the pipe thread may append while the call's thread does
    std::deque<std::string> tail;
    static constexpr std::size_t tail_lines = 20;
};

/// Receives every captured line (from any thread).
using LineSink = std::function<void(std::uint64_t call_id, std::uint8_t stream, std::string_view)>;

class OutputCapture {
public:
    /// Redirects fds 1 and 2 into pipes and std::cout/std::cerr into the capture.
    explicit OutputCapture(LineSink sink);
    ~OutputCapture();
    OutputCapture(const OutputCapture&) = delete;
    OutputCapture& operator=(const OutputCapture&) = delete;

    /// Marks the current thread as running `ctx` (null: none).
    void enter(CallContext* ctx) noexcept;
    /// Emits the current thread's partial lines and whatever fds 1/2 hold now; then leaves.
    void leave() noexcept;
    /// A descriptor that still reaches the original stderr (for the worker's own messages).
    [[nodiscard]] int original_stderr() const noexcept { return orig_err_; }
    /// The read ends of the pipes behind fds 1 and 2 (non-blocking; -1 when there are none).
    [[nodiscard]] std::pair<int, int> pipe_read_fds() const noexcept {
        return {pipe_out_, pipe_err_};
    }

private:
    class StreamBuf;
    void emit(std::uint64_t call_id, CallContext* ctx, std::uint8_t stream, std::string_view line);
    void drain_pipes(bool block);
    void pipe_thread();

    LineSink sink_;
    int orig_out_ = -1, orig_err_ = -1;
    int pipe_out_ = -1, pipe_err_ = -1;  // read ends
    int wake_[2] = {-1, -1};
    std::unique_ptr<StreamBuf> out_buf_, err_buf_;
    std::streambuf* saved_out_ = nullptr;
    std::streambuf* saved_err_ = nullptr;
    std::mutex pipe_m_;
    std::string pipe_partial_[2];
    std::atomic<int> running_{0};
    std::atomic<CallContext*> only_call_{nullptr};
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace sky::detail
