// A server that already runs an event loop (Boost.Asio) and answers requests by awaiting remote
// calls (api.md section 2b, docs/async.md): each line a client sends on a TCP socket on 127.0.0.1
// becomes a call on the pool, and the answer goes back when the call completes, without a thread
// per request or per node. The pool itself is started with sky::async_start, so the server's
// thread is never blocked, not even while the nodes start.
//
// To show it working on its own, the program is its own client: it connects three clients at
// once, each sends its lines and prints what comes back, then the server stops.
//
//   example_async_server                                  # 2 worker processes on this machine
//   example_async_server --provider ssh --hosts A,B --identity KEY --known-hosts FILE
//
// g++ 12 mishandles some temporaries inside a co_await expression (an initializer list, a
// PoolSpec built in the argument list): name the operands first, as every co_await here does.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <example_provider.hpp>
#include <iostream>
#include <optional>
#include <sky/asio.hpp>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace text {

// The remote work: a line in capitals, and on which node it ran.
std::string shout(std::string line) {
    for (char& c : line) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return line + "! (node " + std::to_string(sky::instance_info().node) + ")";
}

// A request the remote side refuses: the error comes back as sky::RemoteError.
std::string refuse(std::string line) { throw std::invalid_argument("no answer to '" + line + "'"); }

}  // namespace text

namespace {

// One connection: a request per line, an answer per request, in order.
asio::awaitable<void> serve(tcp::socket socket, sky::ComputePool& pool) {
    std::string buffer;
    for (;;) {
        auto [ec, n] = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), '\n',
                                                       asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;  // the client went away
        std::string line = buffer.substr(0, n - 1);
        buffer.erase(0, n);
        std::string answer;
        try {
            if (line.rfind("refuse ", 0) == 0) {
                auto call = sky::compute<text::refuse>(line.substr(7));
                answer = co_await sky::async_run(pool, call, asio::use_awaitable);
            } else {
                auto call = sky::compute<text::shout>(line);
                answer = co_await sky::async_run(pool, call, asio::use_awaitable);
            }
        } catch (const sky::RemoteError& e) {
            answer = "error: " + e.message();
        }
        answer += '\n';
        co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
    }
}

// Accepts `clients` connections and serves each in a coroutine of its own.
asio::awaitable<void> listen(tcp::acceptor& acceptor, sky::ComputePool& pool, int clients) {
    for (int i = 0; i < clients; ++i) {
        tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
        asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), pool), asio::detached);
    }
}

// A client: sends its lines, prints each answer.
asio::awaitable<void> client(std::string name, tcp::endpoint server,
                             std::vector<std::string> lines) {
    tcp::socket socket(co_await asio::this_coro::executor);
    co_await socket.async_connect(server, asio::use_awaitable);
    std::string buffer;
    for (const auto& line : lines) {
        const std::string request = line + "\n";
        co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
        const std::size_t n = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer),
                                                              '\n', asio::use_awaitable);
        std::cout << name << ": " << line << " -> " << buffer.substr(0, n - 1) << "\n";
        buffer.erase(0, n);
    }
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);    // in a worker process this serves calls and never returns
    asio::io_context ctx(1);  // the server's one thread: this one
    std::optional<sky::ComputePool> pool;
    int exit_code = 0;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            // Named first, then awaited (the g++ 12 caveat above).
            sky::PoolSpec spec{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2),
                               .concurrency = 4,
                               .display = sky::Display::quiet};
            pool.emplace(co_await sky::async_start(spec, asio::use_awaitable));
            std::cout << "pool started: " << pool->instance_count() << " nodes\n";

            tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
            const tcp::endpoint server = acceptor.local_endpoint();
            asio::co_spawn(ctx, listen(acceptor, *pool, 3), asio::detached);
            // Three clients at once; their requests are in flight together.
            std::vector<std::string> alice = {"hello", "sky"}, bob = {"asio", "refuse this"},
                                     carol = {"coroutines"};
            auto clients = asio::experimental::make_parallel_group(
                asio::co_spawn(ctx, client("alice", server, alice), asio::deferred),
                asio::co_spawn(ctx, client("bob", server, bob), asio::deferred),
                asio::co_spawn(ctx, client("carol", server, carol), asio::deferred));
            auto [order, ea, eb, ec] = co_await clients.async_wait(
                asio::experimental::wait_for_all(), asio::use_awaitable);
            if (ea) std::rethrow_exception(ea);
            if (eb) std::rethrow_exception(eb);
            if (ec) std::rethrow_exception(ec);
            std::cout << "served 5 requests on one thread\n";
        },
        [&](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "async_server: " << x.what() << "\n";
                exit_code = 1;
            }
        });
    ctx.run();
    return exit_code;
}
