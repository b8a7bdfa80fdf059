#pragma once
/// \file A parallel map (docs/api.md §2a): sky::map<F> and PendingMap. Its results as they complete
/// (Completed, pool.as_completed) are in sky/completions.hpp.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sky/completions.hpp"
#include "sky/compute.hpp"
#include "sky/detail/call.hpp"
#include "sky/detail/ranges.hpp"
#include "sky/errors.hpp"
#include "sky/export.hpp"
#include "sky/pending.hpp"

SKY_PUBLIC_BEGIN

template <class R>
class PendingMap;

namespace detail {

/// The elements of a map, encoded once when sky::map<F>(range) is called (chunks are cut from
/// them when the map meets a pool), and its fixed arguments.
struct MapData {
    Buffer elements;                     ///< every element, encoded as F's first parameter
    std::vector<std::uint64_t> offsets;  ///< count + 1 byte offsets, unless stride is set
    std::size_t stride = 0;              ///< bytes per element when they are all one size
    std::size_t count = 0;
    Buffer fixed;  ///< the fixed arguments, encoded once, appended to every chunk

    /// Where element i starts in `elements`.
    [[nodiscard]] std::size_t offset(std::size_t i) const noexcept {
        return stride ? i * stride : static_cast<std::size_t>(offsets[i]);
    }
};

/// An exception thrown for one element of a chunk, as the worker reports it.
struct ElementError {
    std::uint64_t index = 0;  ///< within its chunk
    std::string type_name;    ///< demangled dynamic type
    std::string message;      ///< what()
    template <class A>
    void serialize(A& ar) {
        ar(index, type_name, message);
    }
};

/// The exception being handled, as an ElementError for element `index` (libsky: demangles).
ElementError describe_current_exception(std::uint64_t index);

/// The chunks of one map as they are sent: one call per chunk, and where each chunk starts.
struct MapRun {
    std::vector<CallDesc> calls;
    std::vector<std::size_t> starts;  ///< calls.size() + 1 element indices
    std::string function;             ///< F's qualified name, for element errors
    [[nodiscard]] std::size_t count(std::size_t chunk) const noexcept {
        return starts[chunk + 1] - starts[chunk];
    }
};

/// Cuts a map into chunks of `chunk` elements (0: the pool's pick, four chunks for each of its
/// `slots`) and builds one call of the chunk runner `base` per chunk.
MapRun plan_map(const CallDesc& base, std::string_view function, const MapData& data,
                std::size_t chunk, std::size_t slots);

/// The error of element `index` (global), built on the client from what its chunk reported.
std::exception_ptr element_error(const MapRun& run, const Outcome& o, std::size_t index,
                                 ElementError e);

/// "sky::map<ns::f>": the name the chunk runner of F is registered under.
template <auto F>
struct MapName {
    static constexpr std::string_view inner = function_name<F>();
    static constexpr std::string_view prefix = "sky::map<";
    static constexpr auto storage = [] {
        std::array<char, prefix.size() + inner.size() + 1> a{};
        std::size_t k = 0;
        for (char c : prefix) a[k++] = c;
        for (char c : inner) a[k++] = c;
        a[k] = '>';
        return a;
    }();
    static constexpr std::string_view value{storage.data(), storage.size()};
};

/// A chunk runner's name back to F's name ("sky::map<ns::f>" -> "ns::f").
constexpr std::string_view mapped_function(std::string_view chunk_runner) noexcept {
    constexpr std::string_view prefix = "sky::map<";
    if (chunk_runner.size() > prefix.size() && chunk_runner.substr(0, prefix.size()) == prefix &&
        chunk_runner.back() == '>')
        return chunk_runner.substr(prefix.size(), chunk_runner.size() - prefix.size() - 1);
    return chunk_runner;
}

/// What a chunk of F travels as: (std::vector<first parameter>, the other parameters...).
template <class Args>
struct chunk_args;
template <class E, class... Fixed>
struct chunk_args<std::tuple<E, Fixed...>> {
    using element = E;
    using fixed = std::tuple<Fixed...>;
};

/// A parameter through which F could change its argument (a non-const lvalue or an rvalue
/// reference): each element then gets its own copy of the fixed arguments, so that no element
/// sees what another did to them and results do not depend on the chunk size.
template <class P>
inline constexpr bool mutable_param = std::is_rvalue_reference_v<P> ||
                                      (std::is_lvalue_reference_v<P> &&
                                       !std::is_const_v<std::remove_reference_t<P>>);

template <auto F, std::size_t... I>
void run_chunk_impl(std::span<const std::byte> in, Buffer& out, std::index_sequence<I...>) {
    using T = function_traits<decltype(F)>;
    using C = chunk_args<typename T::args>;
    using E = typename C::element;
    using P0 = std::tuple_element_t<0, typename T::params>;
    using R = std::decay_t<typename T::result>;
    std::vector<E> elements;
    typename C::fixed fixed;
    load_each(in, elements, std::get<I>(fixed)...);
    std::vector<ElementError> errors;
    const std::size_t n = elements.size();
    auto call = [&](std::size_t i) -> R {
        auto run = [&](auto&& element) -> R {
            if constexpr ((mutable_param<std::tuple_element_t<I + 1, typename T::params>> || ...)) {
                auto copy = fixed;
                return std::invoke(F, std::forward<P0>(element),
                                   std::forward<std::tuple_element_t<I + 1, typename T::params>>(
                                       std::get<I>(copy))...);
            } else {
                return std::invoke(F, std::forward<P0>(element),
                                   std::as_const(std::get<I>(fixed))...);
            }
        };
        if constexpr (std::is_same_v<E, bool>) {
            bool b = elements[i];  // std::vector<bool> hands out proxies
            return run(b);
        } else {
            return run(elements[i]);
        }
    };
    if constexpr (std::is_void_v<R>) {
        for (std::size_t i = 0; i < n; ++i) {
            try {
                call(i);
            } catch (...) {
                errors.push_back(describe_current_exception(i));
            }
        }
        save_to(out, errors);
    } else {
        // A failed element keeps a default value in its place: indices stay aligned.
        std::vector<R> values;
        values.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            try {
                values.push_back(call(i));
            } catch (...) {
                values.resize(i + 1);
                errors.push_back(describe_current_exception(i));
            }
        }
        save_to(out, values, errors);
    }
}

/// The worker side of a map: runs F over one chunk, catching each element's exception.
template <auto F>
void run_chunk(std::span<const std::byte> in, Buffer& out) {
    using C = chunk_args<typename function_traits<decltype(F)>::args>;
    run_chunk_impl<F>(in, out, std::make_index_sequence<std::tuple_size_v<typename C::fixed>>{});
}

template <auto F>
struct MapRegistration {
    // The signature hash also names the chunk format, so a worker built with another one refuses.
    static constexpr std::uint64_t signature =
        fnv1a(type_name<std::remove_pointer_t<decltype(F)>>()) ^ fnv1a("sky::map chunk v1");
    static inline const bool done = register_function(
        FunctionEntry{MapName<F>::value, signature, type_name<std::remove_pointer_t<decltype(F)>>(),
                      &run_chunk<F>});
};

/// A chunk's result, decoded: a value per element (none for void) and the elements that threw.
template <class R>
struct ChunkOutput {
    std::conditional_t<std::is_void_v<R>, std::monostate, std::vector<R>> values;
    std::vector<ElementError> errors;
};

/// Decodes chunk `k` of `run`; bytes that do not fit its element count are a ProtocolError.
template <class R>
ChunkOutput<R> decode_chunk(const Outcome& o, const MapRun& run, std::size_t k) {
    ChunkOutput<R> c;
    const std::size_t n = run.count(k);
    try {
        if constexpr (std::is_void_v<R>)
            load_each(o.result.span(), c.errors);
        else
            load_each(o.result.span(), c.values, c.errors);
    } catch (const std::runtime_error& e) {  // cereal::Exception, or a user type's load()
        throw_undecodable("a map chunk's result", e);
    }
    bool ok = true;
    if constexpr (!std::is_void_v<R>) ok = c.values.size() == n;
    for (std::size_t i = 0; ok && i < c.errors.size(); ++i)
        ok = c.errors[i].index < n && (i == 0 || c.errors[i - 1].index < c.errors[i].index);
    if (!ok) throw ProtocolError("a map chunk's result does not match its elements");
    return c;
}

/// The whole map's result in input order (void: nothing), or the first error in input order.
template <class R>
auto take_map(BatchState& s, const MapRun& run) {
    std::conditional_t<std::is_void_v<R>, std::monostate, std::vector<R>> out;
    if constexpr (!std::is_void_v<R>) out.reserve(run.starts.back());
    for (std::size_t k = 0; k < run.calls.size(); ++k) {
        const Outcome& o = s.outcomes[k];
        if (o.error) std::rethrow_exception(o.error);
        auto c = decode_chunk<R>(o, run, k);
        if (!c.errors.empty()) {
            auto& e = c.errors.front();
            std::rethrow_exception(
                element_error(run, o, run.starts[k] + static_cast<std::size_t>(e.index), e));
        }
        if constexpr (!std::is_void_v<R>)
            out.insert(out.end(), std::make_move_iterator(c.values.begin()),
                       std::make_move_iterator(c.values.end()));
    }
    if constexpr (!std::is_void_v<R>) return out;
}

}  // namespace detail

/// A map that has not run: the chunk runner of F, every element and the fixed arguments, and
/// per-chunk options. An immutable, copyable value (copies share the encoded elements).
template <class R>
class PendingMap {
public:
    using result_type = R;

    PendingMap() = default;
    /// Built by sky::map<F>(range, fixed...).
    PendingMap(detail::CallDesc desc, std::shared_ptr<const detail::MapData> data)
        : desc_(std::move(desc)), data_(std::move(data)) {}

    /// A copy that sends `n` elements per call. Throws sky::ConfigError for 0.
    [[nodiscard]] PendingMap chunk(std::size_t n) const {
        if (n == 0)
            throw ConfigError("sky::map: .chunk(n) needs at least 1 element per call, got 0");
        PendingMap c = *this;
        c.chunk_ = n;
        return c;
    }
    /// A copy whose every chunk fails with sky::TimeoutError when it has not finished in `d`.
    template <class Rep, class Period>
    [[nodiscard]] PendingMap timeout(std::chrono::duration<Rep, Period> d) const {
        PendingMap c = *this;
        c.desc_.options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(d);
        return c;
    }
    /// A copy whose chunks are re-run on another node (up to n times) when their node is lost:
    /// at least once (a chunk lost after it started may run again). Never re-run because the
    /// function threw.
    [[nodiscard]] PendingMap retries(int n) const {
        PendingMap c = *this;
        c.desc_.options.retries = n < 0 ? 0 : n;
        return c;
    }
    /// A copy whose retries re-run a chunk only when it never started
    /// (PendingCompute::at_most_once()).
    [[nodiscard]] PendingMap at_most_once() const {
        PendingMap c = *this;
        c.desc_.options.at_most_once = true;
        return c;
    }

    /// Number of elements.
    [[nodiscard]] std::size_t size() const noexcept { return data_ ? data_->count : 0; }
    /// Elements per call when set with .chunk(n); 0 when the pool picks.
    [[nodiscard]] std::size_t chunk_size() const noexcept { return chunk_; }
    /// Qualified name of F, e.g. "stats::score".
    [[nodiscard]] std::string_view function_name() const noexcept {
        return detail::mapped_function(desc_.function);
    }
    [[nodiscard]] const detail::CallDesc& desc() const noexcept { return desc_; }
    [[nodiscard]] const detail::MapData& data() const noexcept {
        static const detail::MapData empty{};
        return data_ ? *data_ : empty;
    }

    /// Runs the map; one result per element, in input order (void for a void F).
    template <detail::pool P>
    friend auto operator>>(const PendingMap& m, P& pool) {
        return pool.run_map(m);
    }

    template <class Archive>
    void save(Archive& ar) const {
        const auto& d = data();
        ar(std::string(desc_.function), desc_.signature, desc_.options.retries,
           desc_.options.timeout ? desc_.options.timeout->count() : std::int64_t{-1},
           static_cast<std::uint64_t>(chunk_), static_cast<std::uint64_t>(d.count),
           static_cast<std::uint64_t>(d.stride), d.offsets, desc_.options.at_most_once);
        for (const detail::Buffer* b : {&d.elements, &d.fixed}) {
            std::uint64_t n = b->size();
            ar(n);
            if (n) ar.saveBinary(b->data(), n);
        }
    }
    /// Throws cereal::Exception when the bytes do not describe a consistent map.
    template <class Archive>
    void load(Archive& ar) {
        std::string name;
        std::int64_t timeout_ms = -1;
        std::uint64_t chunk = 0, count = 0, stride = 0;
        auto d = std::make_shared<detail::MapData>();
        ar(name, desc_.signature, desc_.options.retries, timeout_ms, chunk, count, stride,
           d->offsets, desc_.options.at_most_once);
        for (detail::Buffer* b : {&d->elements, &d->fixed}) {
            std::uint64_t n = 0;
            ar(n);
            if constexpr (std::is_same_v<Archive, detail::BoundedInputArchive>) ar.check_count(n);
            b->resize(static_cast<std::size_t>(n));
            if (n) ar.loadBinary(b->data(), static_cast<std::size_t>(n));
        }
        const std::uint64_t bytes = d->elements.size();
        bool ok = stride ? d->offsets.empty() && count <= bytes / stride && count * stride == bytes
                         : !d->offsets.empty() && d->offsets.size() - 1 == count &&
                               d->offsets.front() == 0 && d->offsets.back() == bytes;
        for (std::size_t i = 1; ok && !stride && i < d->offsets.size(); ++i)
            ok = d->offsets[i - 1] <= d->offsets[i];
        if (!ok)
            detail::throw_decode_error("a PendingMap whose element offsets do not fit its bytes");
        if (detail::mapped_function(name) == name)
            detail::throw_decode_error("a PendingMap whose function is not a map's chunk runner");
        d->count = static_cast<std::size_t>(count);
        d->stride = static_cast<std::size_t>(stride);
        chunk_ = static_cast<std::size_t>(chunk);
        if (timeout_ms >= 0) desc_.options.timeout = std::chrono::milliseconds{timeout_ms};
        desc_.owned_name = std::make_shared<const std::string>(std::move(name));
        desc_.function = *desc_.owned_name;
        data_ = std::move(d);
    }

private:
    detail::CallDesc desc_;  ///< the chunk runner and the per-chunk options (no arguments)
    std::shared_ptr<const detail::MapData> data_;
    std::size_t chunk_ = 0;
};

/// The value behind sky::map<F>: call it with a sized range (and F's other arguments).
template <auto F>
requires std::is_function_v<std::remove_pointer_t<decltype(F)>>
class MapFunction {
    using traits = detail::function_traits<decltype(F)>;

public:
    /// The decayed result type of F; the map gives std::vector<result_type> (void: nothing).
    using result_type = std::decay_t<typename traits::result>;

    /// Encodes every element (as F's first parameter) and the fixed arguments; nothing runs
    /// until the map meets a pool.
    template <detail::ranges::input_range Range, class... Fixed>
    requires(detail::ranges::sized_range<Range>&& traits::arity == 1 + sizeof...(Fixed) &&
             std::is_invocable_v<decltype(F), detail::ranges::range_reference_t<Range>, Fixed...>)
        PendingMap<result_type>
    operator()(Range&& range, Fixed&&... fixed) const {
        static_assert(detail::all_serializable<typename traits::args>::value);
        static_assert(detail::argument_must_be_serializable<result_type>::value);
        (void)detail::MapRegistration<F>::done;  // instantiates the static registration
        using E = std::tuple_element_t<0, typename traits::args>;
        auto d = std::make_shared<detail::MapData>();
        const auto size = static_cast<std::size_t>(std::ranges::size(range));
        std::size_t count = 0;
        if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
            d->stride = sizeof(E);
            if constexpr (detail::ranges::contiguous_range<Range> &&
                          std::is_same_v<detail::ranges::range_value_t<Range>, E>) {
                count = size;
                d->elements.append(std::ranges::data(range), size * sizeof(E));
            } else {
                d->elements.reserve(size * sizeof(E));
                for (auto&& e : range) {
                    const E v = static_cast<E>(e);
                    d->elements.append(&v, sizeof v);
                    ++count;
                }
            }
        } else {
            d->offsets.reserve(size + 1);
            d->offsets.push_back(0);
            detail::OutputArchive ar(d->elements);
            for (auto&& e : range) {
                ar(detail::as_param<E>(std::forward<decltype(e)>(e)));
                d->offsets.push_back(d->elements.size());
                ++count;
            }
        }
        d->count = count;
        if constexpr (sizeof...(Fixed) > 0)
            encode_fixed(d->fixed, std::make_index_sequence<sizeof...(Fixed)>{},
                         std::forward<Fixed>(fixed)...);
        detail::CallDesc desc;
        desc.function = detail::MapName<F>::value;
        desc.signature = detail::MapRegistration<F>::signature;
        return PendingMap<result_type>(std::move(desc), std::move(d));
    }

    /// Runs F over the range here, now, with no serialization (the fixed arguments are passed
    /// as they are, to every element).
    template <detail::ranges::input_range Range, class... Fixed>
    requires std::is_invocable_v<decltype(F), detail::ranges::range_reference_t<Range>,
                                 Fixed&...> auto
    local(Range&& range, Fixed&&... fixed) const {
        if constexpr (std::is_void_v<result_type>) {
            for (auto&& e : range) std::invoke(F, std::forward<decltype(e)>(e), fixed...);
        } else {
            std::vector<result_type> out;
            for (auto&& e : range)
                out.push_back(std::invoke(F, std::forward<decltype(e)>(e), fixed...));
            return out;
        }
    }

    /// "sky::map<ns::f>": the name F's chunk runner is registered under.
    static constexpr std::string_view name() noexcept { return detail::MapName<F>::value; }

private:
    template <std::size_t... I, class... A>
    static void encode_fixed(detail::Buffer& out, std::index_sequence<I...>, A&&... a) {
        detail::save_to(out, detail::as_param<std::tuple_element_t<I + 1, typename traits::args>>(
                                 std::forward<A>(a))...);
    }
};

/// sky::map<f>: calls f(element, fixed...) for every element of a range, in chunks, on a pool.
template <auto F>
inline constexpr MapFunction<F> map{};

namespace detail {

/// Expands a finished map chunk into one Completed per element, in element order.
template <class R>
void expand_chunk(const MapRun& run, std::size_t k, const Outcome& o,
                  std::deque<Completed<R>>& out) {
    const std::size_t first = run.starts[k], n = run.count(k);
    std::exception_ptr whole = o.error;
    ChunkOutput<R> c;
    if (!whole) {
        try {
            c = decode_chunk<R>(o, run, k);
        } catch (...) {
            whole = std::current_exception();
        }
    }
    std::size_t e = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (whole) {
            out.push_back(Completed<R>::failure(first + i, whole));
        } else if (e < c.errors.size() && c.errors[e].index == i) {
            out.push_back(Completed<R>::failure(
                first + i, element_error(run, o, first + i, std::move(c.errors[e]))));
            ++e;
        } else if constexpr (std::is_void_v<R>) {
            out.push_back(Completed<R>::success(first + i));
        } else {
            out.push_back(Completed<R>::success(first + i, std::move(c.values[i])));
        }
    }
}

}  // namespace detail

SKY_PUBLIC_END
