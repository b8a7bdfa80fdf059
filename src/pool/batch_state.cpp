// BatchState's synchronisation (sky/detail/call.hpp): the caller waits on it, or is called back
// through its completion hook; the pool completes its items from its I/O threads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "io/io_core.hpp"
#include "sky/detail/call.hpp"

namespace sky::detail {

struct BatchState::Sync {
    explicit Sync(std::size_t n) : remaining(n), done(n == 0) { finished.reserve(n); }
    std::mutex m;
    std::condition_variable cv;
    std::size_t remaining;
    std::atomic<bool> done;
    std::vector<std::size_t> finished;  ///< item indices in the order they finished
    std::size_t taken = 0;              ///< how many of them next_finished() handed out
    int waiting_all = 0;   ///< threads asleep in wait() or wait_for(): woken by the last item
    int waiting_next = 0;  ///< threads asleep in next_finished(): woken by each item
    std::atomic<std::size_t> failed{0};  ///< items finished with an error
    std::function<void()> hook;          ///< on_finished(), until it is called
};

BatchState::BatchState(std::size_t n) : outcomes(n), sync_(std::make_unique<Sync>(n)) {}

BatchState::~BatchState() = default;

void BatchState::complete(std::size_t i, Buffer&& result, int node, std::string instance_id,
                          std::vector<std::string> log_tail) {
    auto& o = outcomes[i];
    o.result = std::move(result);
    o.node = node;
    o.instance_id = std::move(instance_id);
    o.log_tail = std::move(log_tail);
    finish_one(i);
}

void BatchState::fail(std::size_t i, std::exception_ptr e) {
    outcomes[i].error = std::move(e);
    finish_one(i);
}

void BatchState::grow(std::size_t n) {
    std::lock_guard lk(sync_->m);
    // Only a batch none of whose items finished (nobody reads its outcomes yet) changes size.
    if (!sync_->finished.empty() || n <= outcomes.size()) return;
    sync_->remaining += n - outcomes.size();
    outcomes.resize(n);
    sync_->finished.reserve(n);
}

void BatchState::finish_one(std::size_t i) {
    const bool failed = outcomes[i].error != nullptr;
    // Counted before `done` is published: a waiter that sees it done sees every error.
    if (failed) sync_->failed.fetch_add(1, std::memory_order_relaxed);
    std::function<void()> hook;
    bool wake = false;
    {
        std::lock_guard lk(sync_->m);
        sync_->finished.push_back(i);
        if (--sync_->remaining == 0) {
            sync_->done.store(true, std::memory_order_release);
            hook = std::move(sync_->hook);
        }
        // Only a sleeper needs the futex wake-up (a spinning waiter sees `done` by itself), and
        // one in wait() only for the last item: a gather's caller is not woken per result.
        wake = sync_->waiting_next > 0 || (sync_->waiting_all > 0 && sync_->remaining == 0);
    }
    if (wake) sync_->cv.notify_all();
    if (hook) hook();  // outside the lock: it may read the outcomes, or post a handler
}

namespace {
// A blocking wait on one of sky's I/O threads (an asynchronous handler without an executor of its
// own) would stall the connections that deliver the result it waits for.
void refuse_on_io_thread() {
    if (io::on_io_thread())
        throw Error(
            "a blocking sky call (>>, |, get(), wait(), as_completed) on one of sky's I/O threads "
            "would stall the connections that deliver its result: give the asynchronous handler "
            "an executor of its own (bind_executor, a strand, a coroutine) or use "
            "sky::async_run");
}
}  // namespace

void BatchState::wait() {
    refuse_on_io_thread();
    // A short spin first: a fast call answers within microseconds, and a futex sleep and
    // wake-up costs about as much as the call itself.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    for (int i = 0;; ++i) {
        if (sync_->done.load(std::memory_order_acquire)) return;
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
        if ((i & 7) == 7) std::this_thread::yield();
    }
    std::unique_lock lk(sync_->m);
    ++sync_->waiting_all;
    sync_->cv.wait(lk, [&] { return sync_->remaining == 0; });
    --sync_->waiting_all;
}

bool BatchState::wait_for_ns(std::chrono::nanoseconds d) {
    if (sync_->done.load(std::memory_order_acquire)) return true;
    std::unique_lock lk(sync_->m);
    ++sync_->waiting_all;
    const bool done = sync_->cv.wait_for(lk, d, [&] { return sync_->remaining == 0; });
    --sync_->waiting_all;
    return done;
}

bool BatchState::ready() const noexcept { return sync_->done.load(std::memory_order_acquire); }

bool BatchState::next_finished(std::size_t& index) {
    refuse_on_io_thread();
    std::unique_lock lk(sync_->m);
    if (sync_->taken == outcomes.size()) return false;
    ++sync_->waiting_next;
    sync_->cv.wait(lk, [&] { return sync_->taken < sync_->finished.size(); });
    --sync_->waiting_next;
    index = sync_->finished[sync_->taken++];
    return true;
}

std::exception_ptr BatchState::first_error() const {
    // No scan of every outcome when none failed (a gather's common case).
    if (sync_->failed.load(std::memory_order_relaxed) == 0) return nullptr;
    for (auto& o : outcomes)
        if (o.error) return o.error;
    return nullptr;
}

void BatchState::on_finished(std::function<void()> hook) {
    {
        std::lock_guard lk(sync_->m);
        if (sync_->remaining > 0) {
            sync_->hook = std::move(hook);
            return;
        }
    }
    hook();
}

}  // namespace sky::detail
