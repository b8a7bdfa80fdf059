#include "io/io_core.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "util/env.hpp"

namespace sky::detail::io {

namespace {

thread_local bool t_io_thread = false;

int bounded_env(const char* name, int fallback, int lo, int hi) {
    const std::string v = env_or(name);
    if (v.empty()) return fallback;
    try {
        const int n = std::stoi(v);
        return n < lo ? lo : n > hi ? hi : n;
    } catch (const std::exception&) {
        return fallback;
    }
}

// Made once and never destroyed: a handler or a late close() from another static's destructor
// finds the context still there. Its idle threads sleep in epoll until the process ends.
struct Core {
    const int threads = bounded_env("SKY_IO_THREADS", 2, 1, 16);
    // Concurrency hint 1 whatever the thread count: a thread that completes a read runs its
    // handler itself instead of first waking another thread to wait in epoll (a futex wake on
    // the path of every result). The second thread still takes work posted from outside (a
    // caller's writes, timers) while the first is busy. Measured on 16 cores (bench/dispatch,
    // docs/performance.md): the `>>` round trip up to 6 us and gather 8 to 19% better than
    // with Asio's default hint for 2 threads.
    boost::asio::io_context ctx{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> keep{
        ctx.get_executor()};
    std::vector<std::thread> runners;

    Core() {
        runners.reserve(static_cast<std::size_t>(threads));
        for (int i = 0; i < threads; ++i)
            runners.emplace_back([this] {
                t_io_thread = true;
                // A handler that throws is a bug in sky; the thread goes on serving the others.
                for (;;) {
                    try {
                        ctx.run();
                        return;
                    } catch (...) {
                    }
                }
            });
        for (auto& t : runners) t.detach();
    }
};

Core& core() {
    static Core* c = new Core();
    return *c;
}

}  // namespace

boost::asio::io_context& context() { return core().ctx; }

boost::asio::io_context::executor_type executor() { return core().ctx.get_executor(); }

int io_threads() { return core().threads; }

bool on_io_thread() noexcept { return t_io_thread; }

boost::asio::thread_pool& blocking() {
    static auto* pool = new boost::asio::thread_pool(
        static_cast<std::size_t>(bounded_env("SKY_BLOCKING_THREADS", 8, 1, 64)));
    return *pool;
}

}  // namespace sky::detail::io
