#pragma once
/// \file Deferred computations and the operators that run them (docs/api.md §2).
#include <chrono>
#include <concepts>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sky/detail/call.hpp"
#include "sky/distributed.hpp"
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

class ComputePool;
template <class R>
class PendingCompute;
template <class... Rs>
class PendingBatch;
template <class R>
class PendingGather;

namespace detail {
/// The operators apply to a ComputePool and nothing else.
template <class P>
concept pool = std::same_as<std::remove_cvref_t<P>, ComputePool>;

template <class T>
struct is_pending : std::false_type {};
template <class R>
struct is_pending<PendingCompute<R>> : std::true_type {};

/// What a batch member of type R becomes in the result tuple (void -> std::monostate).
template <class R>
using batch_value_t = std::conditional_t<std::is_void_v<R>, std::monostate, R>;
}  // namespace detail

/// A call that has not run: function + arguments + options. An immutable, copyable value.
template <class R>
class PendingCompute {
public:
    using result_type = R;

    PendingCompute() = default;
    /// Built by sky::compute<F>(args...); also usable to call a registered function by name.
    explicit PendingCompute(detail::CallDesc desc) : desc_(std::move(desc)) {}

    /// A copy whose call fails with sky::TimeoutError when it has not finished in `d`.
    template <class Rep, class Period>
    [[nodiscard]] PendingCompute timeout(std::chrono::duration<Rep, Period> d) const {
        PendingCompute c = *this;
        c.desc_.options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(d);
        return c;
    }
    /// A copy that is re-run on another node (up to n times) when its node is lost: at least
    /// once, for idempotent work (a call lost after it started may run again). Never re-run
    /// because the function threw.
    [[nodiscard]] PendingCompute retries(int n) const {
        PendingCompute c = *this;
        c.desc_.options.retries = n < 0 ? 0 : n;
        return c;
    }
    /// A copy whose retries re-run it only when it never started: a call lost after it started
    /// fails with sky::NodeLostError whose started() is true, so a function with side effects
    /// never runs twice because of sky. The worker waits for the client's word before it runs
    /// the function (one round trip more per call).
    [[nodiscard]] PendingCompute at_most_once() const {
        PendingCompute c = *this;
        c.desc_.options.at_most_once = true;
        return c;
    }
    /// A copy that runs with a distributed-training plugin (`sky::distributed::torch{}`, ...):
    /// while it runs, the worker sets that framework's rendezvous variables, and a broadcast
    /// runs it once per rank (docs/api.md §11). Throws sky::ConfigError for an unknown backend.
    template <detail::distributed_plugin P>
    [[nodiscard]] PendingCompute with(const P& plugin) const {
        PendingCompute c = *this;
        c.desc_.options.plugin = detail::plugin_spec(plugin);
        return c;
    }

    /// Qualified name of the function, e.g. "stats::mean".
    [[nodiscard]] std::string_view function_name() const noexcept { return desc_.function; }
    [[nodiscard]] const detail::CallDesc& desc() const noexcept { return desc_; }

    /// Runs on one worker and returns the result.
    template <detail::pool P>
    friend R operator>>(const PendingCompute& p, P& pool) {
        return pool.run(p);
    }
    /// Runs once on every node; results in node order (void for a void function).
    template <detail::pool P>
    friend auto operator|(const PendingCompute& p, P& pool) {
        return pool.broadcast(p);
    }
    /// Groups two calls to run in parallel: `(a & b) >> pool`.
    template <class R2>
    friend PendingBatch<R, R2> operator&(const PendingCompute& a, const PendingCompute<R2>& b) {
        return PendingBatch<R, R2>({a.desc_, b.desc()});
    }

    template <class Archive>
    void save(Archive& ar) const {
        ar(std::string(desc_.function), desc_.signature, desc_.options.retries,
           desc_.options.timeout ? desc_.options.timeout->count() : std::int64_t{-1},
           desc_.options.plugin.kind, desc_.options.plugin.backend, desc_.options.at_most_once);
        std::uint64_t n = desc_.args ? desc_.args->size() : 0;
        ar(n);
        if (n) ar.saveBinary(desc_.args->data(), n);
    }
    template <class Archive>
    void load(Archive& ar) {
        std::string name;
        std::int64_t timeout_ms = -1;
        ar(name, desc_.signature, desc_.options.retries, timeout_ms, desc_.options.plugin.kind,
           desc_.options.plugin.backend, desc_.options.at_most_once);
        if (timeout_ms >= 0) desc_.options.timeout = std::chrono::milliseconds{timeout_ms};
        if (desc_.options.plugin.kind > detail::PluginSpec::transformers)
            detail::throw_decode_error("unknown distributed plugin in a PendingCompute");
        desc_.owned_name = std::make_shared<const std::string>(std::move(name));
        desc_.function = *desc_.owned_name;
        std::uint64_t n = 0;
        ar(n);
        auto args = detail::make_shared_buffer();
        args->resize(n);
        if (n) ar.loadBinary(args->data(), n);
        desc_.args = std::move(args);
    }

private:
    detail::CallDesc desc_;
};

/// A fixed group of calls of possibly different result types, run in parallel.
/// `batch >> pool` returns std::tuple<Rs...> (void members become std::monostate).
template <class... Rs>
class PendingBatch {
public:
    explicit PendingBatch(std::vector<detail::CallDesc> calls) : calls_(std::move(calls)) {}

    [[nodiscard]] const std::vector<detail::CallDesc>& calls() const noexcept { return calls_; }
    static constexpr std::size_t size() noexcept { return sizeof...(Rs); }

    template <detail::pool P>
    friend std::tuple<detail::batch_value_t<Rs>...> operator>>(const PendingBatch& b, P& pool) {
        return pool.run_batch(b);
    }
    template <class R2>
    friend PendingBatch<Rs..., R2> operator&(const PendingBatch& a, const PendingCompute<R2>& b) {
        auto c = a.calls_;
        c.push_back(b.desc());
        return PendingBatch<Rs..., R2>(std::move(c));
    }
    template <class R0>
    friend PendingBatch<R0, Rs...> operator&(const PendingCompute<R0>& a, const PendingBatch& b) {
        std::vector<detail::CallDesc> c{a.desc()};
        c.insert(c.end(), b.calls_.begin(), b.calls_.end());
        return PendingBatch<R0, Rs...>(std::move(c));
    }
    template <class... Ss>
    friend PendingBatch<Rs..., Ss...> operator&(const PendingBatch& a,
                                                const PendingBatch<Ss...>& b) {
        auto c = a.calls_;
        c.insert(c.end(), b.calls().begin(), b.calls().end());
        return PendingBatch<Rs..., Ss...>(std::move(c));
    }

private:
    std::vector<detail::CallDesc> calls_;
};

/// A dynamic number of calls of one result type; `>> pool` returns std::vector<R> in input order.
template <class R>
class PendingGather {
public:
    explicit PendingGather(std::vector<PendingCompute<R>> items) : items_(std::move(items)) {}
    [[nodiscard]] const std::vector<PendingCompute<R>>& items() const noexcept { return items_; }
    [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }

    template <detail::pool P>
    friend auto operator>>(const PendingGather& g, P& pool) {
        return pool.run_gather(g);
    }

private:
    std::vector<PendingCompute<R>> items_;
};

/// Same as `p1 & p2 & ...`.
template <class... Rs>
requires(sizeof...(Rs) >= 1) PendingBatch<Rs...> gather(const PendingCompute<Rs>&... ps) {
    return PendingBatch<Rs...>({ps.desc()...});
}

/// A dynamic group of calls of one type.
template <class R>
PendingGather<R> gather(std::vector<PendingCompute<R>> ps) {
    return PendingGather<R>(std::move(ps));
}

SKY_PUBLIC_END
