#pragma once
// The frames out of a worker, whatever connection carries them now. Small frames are batched
// until flush(). In a resumable session (the client may come back after the connection drops)
// every result and error frame is kept until the client acknowledges it, and frames written
// while no connection is attached are dropped, except those kept.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "io/transport.hpp"
#include "runtime/owned_result.hpp"
#include "runtime/protocol.hpp"

namespace sky::detail {

class Outbox {
public:
    /// Frames go to `t` (not owned) until detach().
    explicit Outbox(Transport& t) : t_(&t) {}
    /// Stops the flusher.
    ~Outbox();
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;

    /// How long a call's "started" may wait after started_soon(), and an answer after
    /// frame_soon().
    static constexpr std::chrono::microseconds started_bound{1000};
    /// Answers that frame_soon() lets wait in the batch before it is written anyway.
    static constexpr std::size_t batch_answers = 32;

    /// Keeps result and error frames until acknowledged, and never throws on a broken
    /// connection (the session outlives it). Set before the first call.
    void set_resumable(bool on);

    /// Appends a frame to the batch.
    void append(MsgType type, std::uint64_t id, std::span<const std::byte> payload);
    /// Call `id` starts: its "started" leaves within started_bound, with the next write when
    /// there is one, else written by a flusher thread; a call that answers before is not
    /// announced at all (its answer says more). A quick call thus costs no frame, write or
    /// wake-up of the client more than its answer.
    void started_soon(std::uint64_t id);
    /// A line of output, sent at once.
    void log(std::uint64_t id, std::uint8_t stream, std::string_view line);
    /// A finished frame (header at the front), followed on the wire by `tail` (a large result
    /// handed over by its function: the header's length counts it). Large frames are written
    /// without a copy; `tail` lives until its frame is written, or, when kept, acknowledged.
    void frame(Buffer&& f, bool flush_now, OwnedBytes tail = {});
    /// frame() of an answer while more calls of this worker wait to run: it joins the batch and
    /// leaves with the next write, once batch_answers wait, or within started_bound (the
    /// flusher), whichever comes first. A run of quick calls then costs the worker one write
    /// (and the client one read and one wake-up) per batch instead of one per call. A crash of
    /// the process before the write loses the batched answers (their calls are lost with it).
    void frame_soon(Buffer&& f, OwnedBytes tail = {});
    /// Writes the batch.
    void flush();

    /// The connection is gone: frames are kept or dropped until attach().
    void detach();
    /// A resumed connection: sends "started" for each call `running()` names, then every kept
    /// frame in the order it was first written, then goes on writing to `t`.
    void attach(Transport& t, const std::function<std::vector<std::uint64_t>()>& running);
    /// The client received these calls' answers: they are forgotten.
    void ack(std::span<const std::uint64_t> call_ids);
    /// Sends the kept answer of call `id` again (a call frame for a call that finished);
    /// false when none is kept.
    bool resend(std::uint64_t id);
    /// Answers kept, not yet acknowledged.
    [[nodiscard]] std::size_t kept() const;

private:
    /// Writes `parts` to the connection; a broken one is detached in a resumable session,
    /// else the error is thrown.
    void write_locked(std::span<const std::span<const std::byte>> parts);
    void flush_locked();
    void flusher();
    /// Drops call `id` from soon_ (its answer is on its way).
    void answered_locked(std::uint64_t id);
    /// A frame's bytes, and what follows them on the wire.
    struct Parts {
        Buffer head;
        OwnedBytes tail;
    };
    /// Keeps the answer of call `id`; returns the kept frame.
    const Parts& keep_locked(std::uint64_t id, Parts&& f);
    /// Adds a frame to the batch, or, when large, writes the batch and then the frame from
    /// where it is.
    void send_locked(const Parts& f);
    /// An answer or other finished frame into the batch (kept first when it must be).
    void add_locked(Buffer&& f, OwnedBytes&& tail);

    mutable std::mutex m_;
    std::condition_variable soon_cv_;
    /// Calls announced with started_soon() whose "started" has not been written, and when.
    std::vector<std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> soon_;
    /// Answers in buf_ that frame_soon() let wait, and since when the first of them waits.
    std::size_t batched_ = 0;
    std::optional<std::chrono::steady_clock::time_point> batched_since_;
    /// The last started_soon() or frame_soon(): a flusher that was busy this recently looks
    /// again within started_bound by itself instead of sleeping until it is woken (a wake-up
    /// per call is a system call and a context switch on the path of every call).
    std::chrono::steady_clock::time_point last_busy_{};
    /// The flusher sleeps until woken (nothing to write, nothing recent).
    bool flusher_idle_ = false;
    bool stop_ = false;
    std::thread flusher_;  // started by the first started_soon()
    Transport* t_;
    bool resumable_ = false;
    Buffer buf_;
    /// Kept answers by sequence number (the order written): call id and frame; and the
    /// sequence number of each kept call id.
    std::map<std::uint64_t, std::pair<std::uint64_t, Parts>> kept_;
    std::unordered_map<std::uint64_t, std::uint64_t> kept_by_id_;
    std::uint64_t next_seq_ = 0;
};

}  // namespace sky::detail
