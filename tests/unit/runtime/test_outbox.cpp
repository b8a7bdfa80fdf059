// The worker's outbox (runtime/worker/outbox.hpp): answers that wait for queued calls leave
// together, in one write, and never later than the bound; a full batch and a plain frame() go
// at once.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/protocol.hpp"
#include "runtime/worker/outbox.hpp"

using namespace sky::detail;
using Clock = std::chrono::steady_clock;

namespace {

// Records each write_all as one write: the bytes, and the frames' call ids in order.
class Recorder final : public Transport {
public:
    std::size_t read_some(std::span<std::byte>) override { return 0; }
    void write_all(std::span<const std::span<const std::byte>> bufs) override {
        std::lock_guard lk(m);
        std::vector<std::byte> w;
        for (auto b : bufs) w.insert(w.end(), b.begin(), b.end());
        writes.push_back(std::move(w));
        cv.notify_all();
    }
    void shutdown() noexcept override {}
    [[nodiscard]] std::string describe() const override { return "recorder"; }

    std::size_t count() {
        std::lock_guard lk(m);
        return writes.size();
    }
    bool wait_for_writes(std::size_t n, std::chrono::milliseconds within) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, within, [&] { return writes.size() >= n; });
    }
    // The call ids of the frames of write k.
    std::vector<std::uint64_t> ids(std::size_t k) {
        std::lock_guard lk(m);
        std::vector<std::uint64_t> v;
        const auto& w = writes.at(k);
        for (std::size_t at = 0; at + frame_header_size <= w.size();) {
            const FrameHeader h = decode_header(w.data() + at, 1 << 20);
            v.push_back(h.call_id);
            at += frame_header_size + h.length;
        }
        return v;
    }

    std::mutex m;
    std::condition_variable cv;
    std::vector<std::vector<std::byte>> writes;
};

Buffer answer(std::uint64_t id) {
    Buffer f;
    const std::byte payload[4] = {};
    append_frame(f, MsgType::result, id, payload);
    return f;
}

}  // namespace

TEST_CASE("outbox: answers that wait for queued calls leave together within the bound",
          "[outbox]") {
    Recorder t;
    Outbox out(t);
    const auto t0 = Clock::now();
    for (std::uint64_t id = 1; id <= 5; ++id) out.frame_soon(answer(id));
    // Nothing is written while they wait (the bound is a millisecond: a loaded machine may
    // already have passed it, so only a write that came this early would be one of them).
    if (Clock::now() - t0 < Outbox::started_bound / 2) CHECK(t.count() == 0);
    REQUIRE(t.wait_for_writes(1, std::chrono::seconds(5)));
    CHECK(t.count() == 1);
    CHECK(t.ids(0) == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("outbox: a full batch of waiting answers is written at once", "[outbox]") {
    Recorder t;
    Outbox out(t);
    for (std::uint64_t id = 1; id <= Outbox::batch_answers; ++id) out.frame_soon(answer(id));
    // Written by the call that filled the batch, on this thread.
    REQUIRE(t.count() == 1);
    CHECK(t.ids(0).size() == Outbox::batch_answers);
    CHECK(t.ids(0).front() == 1);
    CHECK(t.ids(0).back() == Outbox::batch_answers);
}

TEST_CASE("outbox: a flushed answer takes the waiting ones along in one write", "[outbox]") {
    Recorder t;
    Outbox out(t);
    out.frame_soon(answer(7));
    out.frame_soon(answer(8));
    out.frame(answer(9), true);
    REQUIRE(t.count() >= 1);
    // The flusher may have written 7 and 8 first on a slow machine; either way every answer is
    // written once, in order.
    std::vector<std::uint64_t> all;
    for (std::size_t k = 0; k < t.count(); ++k)
        for (auto id : t.ids(k)) all.push_back(id);
    CHECK(all == std::vector<std::uint64_t>{7, 8, 9});
    // Nothing is left for the flusher to write later.
    std::this_thread::sleep_for(3 * Outbox::started_bound);
    std::size_t frames = 0;
    for (std::size_t k = 0; k < t.count(); ++k) frames += t.ids(k).size();
    CHECK(frames == 3);
}
