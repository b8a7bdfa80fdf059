#pragma once
/// \file The pool of nodes that runs computations (docs/api.md §4).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sky/accelerator.hpp"
#include "sky/completions.hpp"
#include "sky/detail/call.hpp"
#include "sky/events.hpp"
#include "sky/export.hpp"
#include "sky/image.hpp"
#include "sky/instance.hpp"
#include "sky/map.hpp"
#include "sky/pending.hpp"
#include "sky/providers.hpp"
#include "sky/spot.hpp"
#include "sky/volume.hpp"

SKY_PUBLIC_BEGIN

/// How a pool shows what it does.
enum class Display {
    log,      ///< events as readable lines on stderr; remote output as "[node N] ..."
    spinner,  ///< one live line per node (plain lines when stderr is not a terminal)
    quiet,    ///< nothing
};

/// An elastic pool's bounds (docs/api.md §4a): it grows with its backlog up to `max`, ends nodes
/// idle for `scaledown_window` down to `min`, and with min = 0 sleeps at zero nodes.
struct Autoscale {
    int min = 0;  ///< never fewer live nodes (0 allows scale to zero)
    int max = 0;  ///< never more; 0 = autoscaling off (the pool keeps `nodes`)
    /// A node with no call in flight or pinned for this long is ended.
    std::chrono::seconds scaledown_window{60};
};

/// A pool's spending limits in US dollars (docs/api.md §4a); 0 = no limit.
struct Budget {
    /// The whole spend (every node ever launched, billing-unit rounding included): reaching it
    /// ends every node and fails every call with sky::BudgetExceededError.
    double max_total_usd = 0;
    /// The live nodes' summed hourly price: a scale-up or replacement that would pass it is not
    /// made.
    double max_hourly_usd = 0;
    /// Fraction of max_total_usd at which BudgetWarning is sent, once.
    double warn_at = 0.8;
};

/// Everything a pool needs to know; an aggregate for designated initializers (keep field order).
struct PoolSpec {
    Provider provider = Local{};
    int nodes = 1;
    std::optional<Accelerator> accelerator;
    std::optional<std::string> machine;
    std::optional<int> cpu;
    std::optional<std::string> memory;
    Image image{};
    Spot spot = Spot{};
    std::vector<Volume> volumes{};
    std::map<std::string, std::string> env{};
    std::chrono::seconds timeout{3600};
    std::chrono::seconds idle_timeout{600};
    int concurrency = 1;
    Display display = Display::log;
    Callback on_event{};
    bool collect_metrics = true;
    /// Elastic bounds; {} (max = 0) keeps the pool at `nodes` (0 = lazy start needs max > 0).
    Autoscale autoscale{};
    /// Spending limits; {} = none.
    Budget budget{};

    /// Throws sky::ConfigError naming the first bad field and its value.
    void validate() const;
    /// In libsky: destroying the eighteen fields is not compiled in every program that makes a
    /// pool. (A declared destructor leaves PoolSpec an aggregate; it is copied where it would
    /// have been moved, which only the pool's construction does.)
    ~PoolSpec();
};

namespace detail {
class PoolCore;
struct PoolAccess;  // sky/asio.hpp's way in
/// What a batch of calls is: each call once, on the node the scheduler picks, or each call once
/// on every node.
enum class BatchKind { calls, broadcast };
}  // namespace detail

/// The asynchronous result of pool.submit(...).
template <class T>
class Future {
public:
    Future(std::shared_ptr<detail::BatchState> state, std::function<T(detail::BatchState&)> take)
        : state_(std::move(state)), take_(std::move(take)) {}

    /// Waits and returns the result (or rethrows the call's error).
    T get() {
        state_->wait();
        return take_(*state_);
    }
    /// True when the result is there within `d`.
    template <class Rep, class Period>
    bool wait_for(std::chrono::duration<Rep, Period> d) {
        return state_->wait_for(d);
    }
    void wait() { state_->wait(); }
    [[nodiscard]] bool ready() const noexcept { return state_->ready(); }
    /// Cancels what has not finished (get() then throws sky::CancelledError); true if it did.
    bool cancel() { return state_->cancel ? state_->cancel() : false; }

private:
    std::shared_ptr<detail::BatchState> state_;
    std::function<T(detail::BatchState&)> take_;
};

/// Provisions nodes, runs computations on them, and tears them all down when it goes away.
class ComputePool {
public:
    /// Provisions, bootstraps and connects every node; on failure, tears down what it started
    /// and throws a typed sky::Error.
    explicit ComputePool(PoolSpec spec);
    ~ComputePool();
    ComputePool(ComputePool&&) noexcept;
    ComputePool& operator=(ComputePool&&) noexcept;
    ComputePool(const ComputePool&) = delete;
    ComputePool& operator=(const ComputePool&) = delete;

    /// Runs one call on one worker.
    template <class R>
    R run(const PendingCompute<R>& p) {
        auto st = start_one(p.desc(), detail::BatchKind::calls);
        st->wait();
        return detail::take<R>(st->outcomes[0]);
    }
    /// Runs every call of a batch in parallel; rethrows the first failure after all finish.
    template <class... Rs>
    std::tuple<detail::batch_value_t<Rs>...> run_batch(const PendingBatch<Rs...>& b) {
        auto st = start_all(b.calls());
        st->wait();
        return take_tuple<Rs...>(*st, std::index_sequence_for<Rs...>{});
    }
    /// Runs a dynamic group; results in input order.
    template <class R>
    auto run_gather(const PendingGather<R>& g) {
        auto st = start_gather(g);
        st->wait();
        return take_vector<R>(*st);
    }
    /// Runs once on every node; results in node order.
    template <class R>
    auto broadcast(const PendingCompute<R>& p) {
        auto st = start_one(p.desc(), detail::BatchKind::broadcast);
        st->wait();
        return take_vector<R>(*st);
    }

    /// Starts a call and returns at once.
    template <class R>
    Future<R> submit(const PendingCompute<R>& p) {
        return Future<R>(start_one(p.desc(), detail::BatchKind::calls),
                         [](detail::BatchState& s) { return detail::take<R>(s.outcomes[0]); });
    }
    template <class... Rs>
    Future<std::tuple<detail::batch_value_t<Rs>...>> submit(const PendingBatch<Rs...>& b) {
        return {start_all(b.calls()), [](detail::BatchState& s) {
                    return take_tuple<Rs...>(s, std::index_sequence_for<Rs...>{});
                }};
    }
    template <class R>
    auto submit(const PendingGather<R>& g) {
        using T = decltype(take_vector<R>(std::declval<detail::BatchState&>()));
        return Future<T>(start_gather(g), [](detail::BatchState& s) { return take_vector<R>(s); });
    }

    /// Runs F over every element of a map in chunks; one result per element, in input order
    /// (void for a void F). The first failure in input order is rethrown after every chunk
    /// finished; an element's exception is a RemoteError that names its index.
    template <class R>
    auto run_map(const PendingMap<R>& m) {
        auto run = plan(m);
        auto st = start_all(run.calls);
        st->wait();
        return detail::take_map<R>(*st, run);
    }
    /// Starts a map and returns at once; get() returns what run_map would.
    template <class R>
    auto submit(const PendingMap<R>& m) {
        auto run = std::make_shared<const detail::MapRun>(plan(m));
        using T = decltype(detail::take_map<R>(std::declval<detail::BatchState&>(), *run));
        return Future<T>(start_all(run->calls),
                         [run](detail::BatchState& s) { return detail::take_map<R>(s, *run); });
    }

    /// Starts a map and returns its results as they arrive: one Completed<R> per element (index:
    /// the element's), delivered chunk by chunk as each chunk finishes. Leaving the loop early
    /// cancels the chunks that have not finished.
    template <class R>
    Completions<R> as_completed(const PendingMap<R>& m) {
        auto run = std::make_shared<const detail::MapRun>(plan(m));
        auto st = start_all(run->calls);
        return Completions<R>(
            std::move(st),
            [run](std::size_t k, const detail::Outcome& o, std::deque<Completed<R>>& out) {
                detail::expand_chunk<R>(*run, k, o, out);
            },
            m.size());
    }
    /// A gather's results as they arrive: one Completed<R> per call, index: its position.
    template <class R>
    Completions<R> as_completed(const PendingGather<R>& g) {
        return Completions<R>(
            start_gather(g),
            [](std::size_t i, const detail::Outcome& o, std::deque<Completed<R>>& out) {
                out.push_back(detail::completed_from<R>(i, o));
            },
            g.size());
    }
    /// A batch's results as they arrive. The members may have different types, so the value is
    /// a std::variant whose alternative `index` holds member `index` (void: std::monostate):
    /// `std::get<0>(done.get())` for the first member, or std::visit.
    template <class... Rs>
    Completions<detail::batch_completed_t<Rs...>> as_completed(const PendingBatch<Rs...>& b) {
        using V = detail::batch_completed_t<Rs...>;
        return Completions<V>(
            start_all(b.calls()),
            [](std::size_t i, const detail::Outcome& o, std::deque<Completed<V>>& out) {
                out.push_back(
                    detail::completed_batch_item<Rs...>(i, o, std::index_sequence_for<Rs...>{}));
            },
            sizeof...(Rs));
    }

    /// Sets the desired node count (clamped to [min, max] on an autoscaled pool; a fixed pool
    /// becomes fixed at n): ready once the pool has exactly n ready nodes (growing: the new ones
    /// are ready, or it holds the ProvisionError; shrinking: the drained ones have ended, idle
    /// ones first, busy ones once their calls finish, never killed). Throws
    /// sky::NotResizableError when it would remove a node of the frozen world.
    Future<void> resize(int n);
    /// Replaces the elastic bounds (max = 0 turns autoscaling off); returns at once. Throws
    /// sky::ConfigError naming a bad bound.
    void resize(const Autoscale& bounds);
    /// Takes node `node` out: it takes no new call, finishes its calls, then is ended (a
    /// NodeDraining event); ready once it has ended. Throws sky::NotResizableError for a node of
    /// the frozen world, sky::ConfigError for a node the pool does not have.
    Future<void> drain(int node);
    /// Forgets the world that distributed calls froze: its nodes may be reaped and drained again.
    void release_world();

    /// Tears down now and reports teardown errors (the destructor never throws).
    void close();
    [[nodiscard]] bool is_active() const noexcept;
    [[nodiscard]] int instance_count() const noexcept;
    [[nodiscard]] std::vector<Instance> instances() const;
    /// Cost accrued so far, in US dollars (0 for Local and SSH).
    [[nodiscard]] double cost() const;
    [[nodiscard]] const std::string& id() const noexcept;
    /// The spec the pool was made with; throws sky::Error on a moved-from pool (it has none).
    [[nodiscard]] const PoolSpec& spec() const;

    /// Calls `handler` for each event of type E; throws sky::Error on a moved-from pool.
    template <class E>
    void on(std::function<void(const E&)> handler) {
        // A generic lambda: its body (and with it the Event variant, whose twenty-one
        // alternatives cost more to compile than the rest of this header) is compiled only in a
        // program that calls on<E>.
        add_handler([h = std::move(handler)](const auto& e) {
            if (auto* p = std::get_if<E>(&e)) h(*p);
        });
    }

private:
    friend struct detail::PoolAccess;
    /// A handle on a started core (sky::async_start), or an empty pool (null: like a moved-from
    /// one). Two parameters, so that `ComputePool pool{{}}` still means a default PoolSpec.
    struct Adopt {};
    ComputePool(Adopt, std::shared_ptr<detail::PoolCore> core) noexcept;

    std::shared_ptr<detail::BatchState> start(std::vector<const detail::CallDesc*> calls,
                                              detail::BatchKind kind);
    std::shared_ptr<detail::BatchState> start_all(const std::vector<detail::CallDesc>& calls);
    /// One call (run, broadcast, submit): no vector of calls is built in the caller's code.
    std::shared_ptr<detail::BatchState> start_one(const detail::CallDesc& call,
                                                  detail::BatchKind kind);
    template <class R>
    std::shared_ptr<detail::BatchState> start_gather(const PendingGather<R>& g) {
        std::vector<const detail::CallDesc*> calls;
        calls.reserve(g.size());
        for (auto& p : g.items()) calls.push_back(&p.desc());
        return start(std::move(calls), detail::BatchKind::calls);
    }
    void add_handler(std::function<void(const Event&)> h);
    /// A map's chunks for this pool: its .chunk(n), else four chunks per slot (nodes, or an
    /// elastic pool's max, x concurrency).
    template <class R>
    detail::MapRun plan(const PendingMap<R>& m) const {
        if (!core_) throw Error("this ComputePool was moved from");
        const auto& s = spec();
        return detail::plan_map(m.desc(), m.function_name(), m.data(), m.chunk_size(),
                                static_cast<std::size_t>(std::max({1, s.nodes, s.autoscale.max})) *
                                    static_cast<std::size_t>(std::max(1, s.concurrency)));
    }

    template <class... Rs, std::size_t... I>
    static std::tuple<detail::batch_value_t<Rs>...> take_tuple(detail::BatchState& s,
                                                               std::index_sequence<I...>) {
        if (auto e = s.first_error()) std::rethrow_exception(e);
        return {take_value<Rs>(s.outcomes[I])...};
    }
    template <class R>
    static detail::batch_value_t<R> take_value(const detail::Outcome& o) {
        if constexpr (std::is_void_v<R>) {
            detail::take<R>(o);
            return {};
        } else {
            return detail::take<R>(o);
        }
    }
    template <class R>
    static auto take_vector(detail::BatchState& s) {
        if (auto e = s.first_error()) std::rethrow_exception(e);
        if constexpr (std::is_void_v<R>) {
            return;
        } else {
            std::vector<R> out;
            out.reserve(s.outcomes.size());
            for (auto& o : s.outcomes) out.push_back(detail::take<R>(o));
            return out;
        }
    }

    std::shared_ptr<detail::PoolCore> core_;
};

namespace detail {
/// Makes one pool per spec, each on a thread of its own (time = the slowest, not the sum). If
/// one fails, the others are still started, then every pool that started is torn down, in
/// parallel, and the first error (in spec order) is rethrown. In libsky (src/pool/multi_pool.cpp).
std::vector<ComputePool> make_pools(std::vector<PoolSpec> specs);
/// Ends every pool at once, each on a thread of its own (one that gets no thread ends on this
/// one), and empties the vector. Never throws.
void tear_down_pools(std::vector<ComputePool>& pools) noexcept;
}  // namespace detail

/// Several pools provisioned in parallel (time = the slowest, not the sum):
/// `sky::MultiPool multi{spec_a, spec_b}; auto& [a, b] = multi;`. They are torn down in
/// parallel too: the destructor takes as long as the slowest pool's teardown.
template <std::size_t N>
class MultiPool {
public:
    /// If one pool fails, the others are still started (each constructor runs to its end), then
    /// every pool that started is torn down, in parallel, and the first error is rethrown.
    template <class... Specs>
    requires(sizeof...(Specs) == N &&
             (std::is_convertible_v<Specs, PoolSpec> && ...)) explicit MultiPool(Specs&&... specs) {
        std::vector<PoolSpec> list;
        list.reserve(N);
        (list.emplace_back(std::forward<Specs>(specs)), ...);
        pools_ = detail::make_pools(std::move(list));
    }
    /// Tears every pool down at once (never throws).
    ~MultiPool() { tear_down(pools_); }
    MultiPool(MultiPool&&) noexcept = default;
    MultiPool& operator=(MultiPool&& o) noexcept {
        if (this != &o) {
            tear_down(pools_);
            pools_ = std::move(o.pools_);
        }
        return *this;
    }
    MultiPool(const MultiPool&) = delete;
    MultiPool& operator=(const MultiPool&) = delete;

    ComputePool& operator[](std::size_t i) { return pools_.at(i); }
    [[nodiscard]] static constexpr std::size_t size() noexcept { return N; }
    auto begin() noexcept { return pools_.begin(); }
    auto end() noexcept { return pools_.end(); }

    template <std::size_t I>
    ComputePool& get() & {
        static_assert(I < N);
        return pools_[I];
    }

private:
    static void tear_down(std::vector<ComputePool>& pools) noexcept {
        detail::tear_down_pools(pools);
    }

    std::vector<ComputePool> pools_;
};

template <class... Specs>
MultiPool(Specs&&...) -> MultiPool<sizeof...(Specs)>;

SKY_PUBLIC_END

// MultiPool's structured bindings (std's templates, specialised outside sky's namespace).
template <std::size_t N>
struct std::tuple_size<sky::MultiPool<N>> : std::integral_constant<std::size_t, N> {};
template <std::size_t I, std::size_t N>
struct std::tuple_element<I, sky::MultiPool<N>> {
    using type = sky::ComputePool;
};
