#pragma once
// The client's I/O core: one boost::asio::io_context for every pool of the process, run by a
// small fixed set of threads, and a bounded pool of threads for the blocking work that remains
// (a cloud's REST call, a process spawn). Node connections (sockets, SSH sessions) and the
// pool's timers (heartbeats, deadlines, silence) all run on the io_context, so the client's
// thread count does not grow with the number of nodes (api.md section 2b).
//
// Internal to libsky: public headers never include Asio, except sky/asio.hpp.
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

namespace sky::detail::io {

/// The process's I/O context, its threads started on first use. It lives until the process
/// ends (its idle threads sleep in epoll), so a handler can never outlive it.
boost::asio::io_context& context();

/// The executor of context(). Each connection or pool serialises its own handlers with a
/// strand on it (boost::asio::make_strand(executor())).
boost::asio::io_context::executor_type executor();

/// How many threads run context(): 2, or SKY_IO_THREADS (1 to 16).
int io_threads();

/// True on one of context()'s threads: code that would block there (a blocking wait on a
/// result that the same threads must deliver) must not run.
bool on_io_thread() noexcept;

/// Threads for blocking work (8, or SKY_BLOCKING_THREADS, 1 to 64), started on first use:
/// node start-up, REST calls, SSH handshakes that have not gone asynchronous. Work posted here
/// must be bounded in time.
boost::asio::thread_pool& blocking();

}  // namespace sky::detail::io
