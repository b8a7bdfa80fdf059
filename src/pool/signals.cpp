#include "pool/signals.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "pool/pool_core.hpp"
#include "sky/init.hpp"

namespace sky::detail::signals {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
// A teardown waits for every pool's close() (each bounded by the backend's own timeouts); past
// this the signal's default action happens anyway, and `sky gc` finds what is left.
constexpr auto kTeardownLimit = std::chrono::seconds(300);

static_assert(std::atomic<int>::is_always_lock_free, "the handler's atomics must be lock-free");

std::atomic<int> g_pipe_write{-1};
std::atomic<int> g_signal{0};  // the signal being handled; 0 until one arrives
std::atomic<bool> g_installed[std::size(kSignals)];

struct Entry {
    std::weak_ptr<PoolCore> pool;
    int closers = 0;     // close() calls in progress
    bool taken = false;  // the teardown started a close() for it
};

struct Registry {
    std::mutex m;
    std::condition_variable cv;
    std::map<const PoolCore*, Entry> pools;
    bool teardown_finished = false;
};

Registry& registry() {
    static auto* r = new Registry();  // never destroyed: the teardown may outlive static objects
    return *r;
}

std::terminate_handler g_previous_terminate = nullptr;

extern "C" void on_signal(int sig) {
    const int saved_errno = errno;
    int none = 0;
    if (!g_signal.compare_exchange_strong(none, sig)) {
        // A second signal during the teardown: its default action, now. `sig` is blocked while
        // this handler runs, so the raised one is delivered as soon as it returns.
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        ::sigaction(sig, &dfl, nullptr);
        ::raise(sig);
    } else {
        const unsigned char b = static_cast<unsigned char>(sig);
        (void)!::write(g_pipe_write.load(), &b, 1);
    }
    errno = saved_errno;
}

// The signal's default action; for these three signals it ends the process.
[[noreturn]] void default_action(int sig) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
    ::_exit(128 + sig);  // not reached unless something blocks the signal in every thread
}

void wait_for_teardown();

void tear_down() {
    // An exit() that begins while this runs (main unwound by a call's CancelledError and
    // returned) waits here before it destroys anything: handlers registered later run first,
    // so this one runs before every static destructor registered so far (those of statics
    // first used during start-up included, which the teardown uses again).
    std::atexit(wait_for_teardown);
    auto& r = registry();
    const auto deadline = std::chrono::steady_clock::now() + kTeardownLimit;
    std::unique_lock lk(r.m);
    // Pools may register while this runs (a start() on another thread): they are closed too.
    for (;;) {
        std::vector<std::shared_ptr<PoolCore>> to_close;
        for (auto& [key, e] : r.pools) {
            if (e.taken) continue;
            e.taken = true;
            // An expired pool is in its destructor, whose own close() ends its entry.
            if (auto p = e.pool.lock()) to_close.push_back(std::move(p));
        }
        if (!to_close.empty()) {
            lk.unlock();
            for (auto& p : to_close) {
                try {  // in parallel: each close waits for its own machines
                    std::thread([p]() mutable {
                        p->close(false);
                        p.reset();  // may run ~PoolCore here
                    }).detach();
                } catch (...) {  // no thread to be had: close it here
                    p->close(false);
                }
            }
            to_close.clear();
            lk.lock();
            continue;
        }
        if (r.pools.empty()) break;
        if (r.cv.wait_until(lk, deadline) == std::cv_status::timeout) break;
    }
    r.teardown_finished = true;
    r.cv.notify_all();
}

void signal_thread(int read_fd) {
    for (;;) {
        unsigned char b = 0;
        const ssize_t n = ::read(read_fd, &b, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n != 1) return;  // cannot happen: the write end is never closed
        tear_down();
        default_action(b);
    }
}

// exit() or std::terminate() on another thread while the teardown runs (a call failed with
// CancelledError and unwound main) waits for it: the teardown's own default action ends the
// process, as the signal would have. Registered with atexit() at installation and again when a
// signal arrives (see tear_down).
void wait_for_teardown() {
    if (g_signal.load() == 0) return;
    auto& r = registry();
    std::unique_lock lk(r.m);
    r.cv.wait_for(lk, kTeardownLimit + std::chrono::seconds(5),
                  [&] { return r.teardown_finished; });
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::seconds(5));  // the default action is on its way
}

void on_terminate() {
    wait_for_teardown();
    if (g_previous_terminate) g_previous_terminate();
    std::abort();
}

void install() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no handler then: default actions as before
    ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
    g_pipe_write = fds[1];
    // The thread takes none of these signals itself: they reach the program's threads, whose
    // handler only writes to the pipe.
    sigset_t all, old;
    sigemptyset(&all);
    for (int s : kSignals) sigaddset(&all, s);
    ::pthread_sigmask(SIG_BLOCK, &all, &old);
    try {
        std::thread(signal_thread, fds[0]).detach();
    } catch (...) {
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        return;
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    std::atexit(wait_for_teardown);
    g_previous_terminate = std::set_terminate(on_terminate);
    for (std::size_t i = 0; i < std::size(kSignals); ++i) {
        struct sigaction current {};
        if (::sigaction(kSignals[i], nullptr, &current) != 0) continue;
        // SIG_IGN (nohup, a daemon) and the program's own handler stay as they are.
        if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (::sigaction(kSignals[i], &sa, nullptr) == 0) g_installed[i] = true;
    }
}

}  // namespace

void register_pool(const std::weak_ptr<PoolCore>& pool) {
    if (sky::is_worker()) return;  // a worker's pools end with the worker; never take its signals
    auto p = pool.lock();
    if (!p) return;
    {
        auto& r = registry();
        std::lock_guard lk(r.m);
        r.pools[p.get()] = Entry{pool, 0, false};
        r.cv.notify_all();
    }
    static std::once_flag once;
    std::call_once(once, install);
}

CloseScope::CloseScope(const PoolCore* pool) : pool_(pool) {
    auto& r = registry();
    std::lock_guard lk(r.m);
    if (auto it = r.pools.find(pool_); it != r.pools.end()) ++it->second.closers;
}

CloseScope::~CloseScope() {
    auto& r = registry();
    std::lock_guard lk(r.m);
    auto it = r.pools.find(pool_);
    if (it == r.pools.end()) return;
    // The close() that ran the teardown is the last one out; one that found the pool already
    // closing returns at once and leaves the entry to it.
    if (--it->second.closers <= 0) {
        r.pools.erase(it);
        r.cv.notify_all();
    }
}

bool installed(int signal) {
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
        if (kSignals[i] == signal) return g_installed[i].load();
    return false;
}

}  // namespace sky::detail::signals
