#pragma once
/// \file Asynchronous use with Boost.Asio completion tokens and coroutines (docs/api.md §2b). The
/// one public header that includes Boost.Asio (Boost 1.81 or later); the others stay free of it.
///
///     double m = co_await sky::async_run(pool, sky::compute<mean>(xs), asio::use_awaitable);
///     sky::async_run(pool, p, [](std::exception_ptr e, double r) { ... });
///     sky::ComputePool pool = co_await sky::async_start(spec, asio::use_awaitable);
///
/// The completion signature is void(std::exception_ptr, R) (void(std::exception_ptr) for void),
/// so every token works: callbacks, use_future, use_awaitable, deferred, detached, as_tuple. The
/// handler runs on its associated executor (a strand's, a coroutine's; one without runs on
/// sky's own I/O thread and must not block), never inline from the initiating call. Cancelling
/// the operation (per-operation cancellation: terminal, partial or total) cancels the call as
/// Future::cancel() does, and the handler gets sky::CancelledError. docs/async.md has the rest.
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "sky/export.hpp"
#include "sky/map.hpp"
#include "sky/pending.hpp"
#include "sky/pool.hpp"

SKY_PUBLIC_BEGIN

namespace detail {

/// sky's own I/O context (in libsky): a handler without an executor of its own runs there.
boost::asio::io_context& io_context();

/// Starts a pool of `spec` without blocking the calling thread; `done` gets the running pool,
/// or the error and an empty pool, on one of sky's threads (in libsky).
void start_pool(PoolSpec spec, std::function<void(std::exception_ptr, ComputePool)> done);

/// What sky/asio.hpp reaches inside ComputePool: the same entry points the blocking forms use.
struct PoolAccess {
    static std::shared_ptr<BatchState> start(ComputePool& pool, std::vector<const CallDesc*> calls,
                                             BatchKind kind) {
        return pool.start(std::move(calls), kind);
    }
    static std::shared_ptr<BatchState> start_all(ComputePool& pool,
                                                 const std::vector<CallDesc>& calls) {
        return pool.start_all(calls);
    }
    template <class R>
    static std::shared_ptr<BatchState> start_gather(ComputePool& pool, const PendingGather<R>& g) {
        return pool.start_gather(g);
    }
    template <class R>
    static MapRun plan(const ComputePool& pool, const PendingMap<R>& m) {
        return pool.plan(m);
    }
    template <class... Rs>
    static auto take_tuple(BatchState& s) {
        return ComputePool::take_tuple<Rs...>(s, std::index_sequence_for<Rs...>{});
    }
    template <class R>
    static auto take_vector(BatchState& s) {
        return ComputePool::take_vector<R>(s);
    }
    static ComputePool adopt(std::shared_ptr<PoolCore> core) noexcept {
        return ComputePool(ComputePool::Adopt{}, std::move(core));
    }
};

/// The completion signature of an operation whose value is V: void(std::exception_ptr, V),
/// where an error comes with V{}; for a V with no default constructor there is no V to give
/// with an error, and the value comes as a std::optional<V> (empty with an error).
template <class V>
struct async_signature {
    using type = std::conditional_t<std::default_initializable<V>, void(std::exception_ptr, V),
                                    void(std::exception_ptr, std::optional<V>)>;
};
template <>
struct async_signature<void> {
    using type = void(std::exception_ptr);
};
template <class V>
using async_signature_t = typename async_signature<V>::type;

/// The executor a handler completes on: its associated one, or sky's I/O context when it has
/// none (Asio's default, the system executor, would start threads of its own for it).
template <class Handler>
auto handler_executor(const Handler& h) {
    auto ex = boost::asio::get_associated_executor(h, io_context().get_executor());
    if constexpr (std::is_same_v<decltype(ex), boost::asio::system_executor>)
        return io_context().get_executor();
    else
        return ex;
}

/// Cancels the calls of a batch when the operation's cancellation slot is signalled.
struct CancelBatch {
    std::weak_ptr<BatchState> state;
    void operator()(boost::asio::cancellation_type_t type) const {
        if (type == boost::asio::cancellation_type::none) return;
        if (auto s = state.lock(); s && s->cancel) s->cancel();
    }
};

/// One asynchronous operation in flight: its handler, the work it keeps on the handler's
/// executor, and how to turn the finished batch into the value.
template <class Handler, class Executor, class Take>
struct AsyncCall {
    AsyncCall(Handler&& h, Executor ex, Take&& t)
        : handler(std::move(h)), work(std::move(ex)), take(std::move(t)) {}
    Handler handler;
    boost::asio::executor_work_guard<Executor> work;  ///< its context runs until it completes
    Take take;
    std::shared_ptr<BatchState> state;
    std::exception_ptr failed;  ///< the calls could not even start

    /// On the handler's executor: the value (or the error), then the handler.
    void finish() {
        auto slot = boost::asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
        std::exception_ptr e = failed;
        using V = decltype(take(*state));
        if constexpr (std::is_void_v<V>) {
            if (!e) {
                try {
                    take(*state);
                } catch (...) {
                    e = std::current_exception();
                }
            }
            std::move(handler)(e);
        } else {
            // Held in an optional, so that V need not be default-constructible; the handler
            // gets a V where V has a default (a value-initialized one with an error), else the
            // optional itself (empty with an error): see async_signature.
            std::optional<V> v;
            if (!e) {
                try {
                    v.emplace(take(*state));
                } catch (...) {
                    e = std::current_exception();
                }
            }
            if constexpr (std::default_initializable<V>)
                std::move(handler)(e, v ? std::move(*v) : V{});
            else
                std::move(handler)(e, std::move(v));
        }
    }
};

/// Starts `start()` (a batch of calls on a pool) and completes `handler` with take(batch) on
/// the handler's executor once every call finished; per-operation cancellation cancels the
/// batch. Nothing runs inline: even a batch that failed at once completes through a post.
template <class Handler, class Start, class Take>
void launch(Handler&& handler, Start&& start, Take&& take) {
    auto ex = handler_executor(handler);
    using Op = AsyncCall<std::decay_t<Handler>, decltype(ex), std::decay_t<Take>>;
    auto op = std::make_shared<Op>(std::move(handler), ex, std::move(take));
    try {
        op->state = start();
    } catch (...) {
        op->failed = std::current_exception();
    }
    auto complete = [op] {
        auto ex = op->work.get_executor();
        boost::asio::post(ex, [op] { op->finish(); });
    };
    if (!op->state) return complete();
    auto slot = boost::asio::get_associated_cancellation_slot(op->handler);
    if (slot.is_connected()) slot.template emplace<CancelBatch>(CancelBatch{op->state});
    op->state->on_finished(std::move(complete));
}

}  // namespace detail

/// Runs one call on one worker: `co_await sky::async_run(pool, p, asio::use_awaitable)` is
/// `p >> pool`. Completes with void(std::exception_ptr, R).
template <class R, class Token>
auto async_run(ComputePool& pool, const PendingCompute<R>& p, Token&& token) {
    return boost::asio::async_initiate<Token, detail::async_signature_t<R>>(
        [](auto handler, ComputePool* pool, PendingCompute<R> p) {
            detail::launch(
                std::move(handler),
                [&] {
                    return detail::PoolAccess::start(*pool, {&p.desc()}, detail::BatchKind::calls);
                },
                [](detail::BatchState& s) { return detail::take<R>(s.outcomes[0]); });
        },
        token, &pool, p);
}

/// Runs every call of a batch (`f() & g()`) in parallel: the value is the tuple `>>` returns.
template <class... Rs, class Token>
auto async_run(ComputePool& pool, const PendingBatch<Rs...>& b, Token&& token) {
    using V = std::tuple<detail::batch_value_t<Rs>...>;
    return boost::asio::async_initiate<Token, detail::async_signature_t<V>>(
        [](auto handler, ComputePool* pool, PendingBatch<Rs...> b) {
            detail::launch(
                std::move(handler), [&] { return detail::PoolAccess::start_all(*pool, b.calls()); },
                [](detail::BatchState& s) { return detail::PoolAccess::take_tuple<Rs...>(s); });
        },
        token, &pool, b);
}

/// Runs a dynamic group (`sky::gather(vector)`): results in input order.
template <class R, class Token>
auto async_run(ComputePool& pool, const PendingGather<R>& g, Token&& token) {
    using V = decltype(detail::PoolAccess::take_vector<R>(std::declval<detail::BatchState&>()));
    return boost::asio::async_initiate<Token, detail::async_signature_t<V>>(
        [](auto handler, ComputePool* pool, PendingGather<R> g) {
            detail::launch(
                std::move(handler), [&] { return detail::PoolAccess::start_gather(*pool, g); },
                [](detail::BatchState& s) { return detail::PoolAccess::take_vector<R>(s); });
        },
        token, &pool, g);
}

/// Runs a map in chunks (`sky::map<f>(range)`): one result per element, in input order.
template <class R, class Token>
auto async_run(ComputePool& pool, const PendingMap<R>& m, Token&& token) {
    using V = decltype(detail::take_map<R>(std::declval<detail::BatchState&>(),
                                           std::declval<const detail::MapRun&>()));
    return boost::asio::async_initiate<Token, detail::async_signature_t<V>>(
        [](auto handler, ComputePool* pool, PendingMap<R> m) {
            // The chunks' plan is made when the calls start; the value is decoded from it.
            auto run = std::make_shared<detail::MapRun>();
            detail::launch(
                std::move(handler),
                [&] {
                    *run = detail::PoolAccess::plan(*pool, m);
                    return detail::PoolAccess::start_all(*pool, run->calls);
                },
                [run](detail::BatchState& s) { return detail::take_map<R>(s, *run); });
        },
        token, &pool, m);
}

/// Runs once on every node (`p | pool`): results in node order.
template <class R, class Token>
auto async_broadcast(ComputePool& pool, const PendingCompute<R>& p, Token&& token) {
    using V = decltype(detail::PoolAccess::take_vector<R>(std::declval<detail::BatchState&>()));
    return boost::asio::async_initiate<Token, detail::async_signature_t<V>>(
        [](auto handler, ComputePool* pool, PendingCompute<R> p) {
            detail::launch(
                std::move(handler),
                [&] {
                    return detail::PoolAccess::start(*pool, {&p.desc()},
                                                     detail::BatchKind::broadcast);
                },
                [](detail::BatchState& s) { return detail::PoolAccess::take_vector<R>(s); });
        },
        token, &pool, p);
}

/// Makes a pool without blocking a thread for it (a cloud's start takes minutes): completes
/// with void(std::exception_ptr, ComputePool); on an error the pool is empty, like a moved-from
/// one, and whatever was started is torn down. Cancellation is not supported: a start runs to
/// its end (a pool that is no longer wanted is closed by destroying it).
template <class Token>
auto async_start(PoolSpec spec, Token&& token) {
    return boost::asio::async_initiate<Token, void(std::exception_ptr, ComputePool)>(
        [](auto handler, PoolSpec spec) {
            auto ex = detail::handler_executor(handler);
            using Handler = decltype(handler);
            struct Op {
                Handler handler;
                boost::asio::executor_work_guard<decltype(ex)> work;
            };
            auto op =
                std::make_shared<Op>(Op{std::move(handler), boost::asio::make_work_guard(ex)});
            detail::start_pool(std::move(spec), [op](std::exception_ptr e, ComputePool pool) {
                auto ex = op->work.get_executor();
                boost::asio::post(ex, [op, e, pool = std::move(pool)]() mutable {
                    std::move(op->handler)(e, std::move(pool));
                });
            });
        },
        token, std::move(spec));
}

SKY_PUBLIC_END
