#pragma once
/// \file Remote functions: sky::compute<F> (docs/api.md §1).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sky/detail/registry.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/export.hpp"
#include "sky/pending.hpp"

SKY_PUBLIC_BEGIN

namespace detail {

template <class T>
struct function_traits;
template <class R, class... A>
struct function_traits<R (*)(A...)> {
    using result = R;
    using args = std::tuple<std::decay_t<A>...>;  // what travels
    using params = std::tuple<A...>;              // as declared (values, references)
    static constexpr std::size_t arity = sizeof...(A);
};
template <class R, class... A>
struct function_traits<R (*)(A...) noexcept> : function_traits<R (*)(A...)> {};
template <class R, class... A>
struct function_traits<R(A...)> : function_traits<R (*)(A...)> {};
template <class R, class... A>
struct function_traits<R(A...) noexcept> : function_traits<R (*)(A...)> {};

template <class T>
struct argument_must_be_serializable {
    static_assert(serializable<T>,
                  "sky::compute: this argument or result type cannot be serialized; give it "
                  "a serialize() member or free function, as for cereal: template <class "
                  "Archive> void serialize(Archive& ar) { ar(a, b); } (see the type in the "
                  "'required from' lines below; docs/concepts.md)");
    static constexpr bool value = true;
};

/// An argument as the parameter type P: a reference when it already is one, else converted.
template <class P, class A>
decltype(auto) as_param(A&& a) {
    if constexpr (std::is_same_v<std::decay_t<A>, P>)
        return static_cast<const P&>(a);
    else
        return P(std::forward<A>(a));
}

template <auto F, class Tuple, std::size_t... I>
void invoke_impl(std::span<const std::byte> in, Buffer& out, std::index_sequence<I...>) {
    using T = function_traits<decltype(F)>;
    Tuple args;
    if constexpr (sizeof...(I) > 0) load_each(in, std::get<I>(args)...);
    // Each decoded argument as its parameter wants it: moved into a value or an rvalue
    // reference, bound to an lvalue reference otherwise.
    using R = std::decay_t<typename T::result>;
    if constexpr (std::is_void_v<R>) {
        std::invoke(
            F, std::forward<std::tuple_element_t<I, typename T::params>>(std::get<I>(args))...);
    } else {
        R r = std::invoke(
            F, std::forward<std::tuple_element_t<I, typename T::params>>(std::get<I>(args))...);
        save_result(out, r);
    }
}

template <auto F>
void invoke(std::span<const std::byte> in, Buffer& out) {
    using T = function_traits<decltype(F)>;
    invoke_impl<F, typename T::args>(in, out, std::make_index_sequence<T::arity>{});
}

template <auto F>
struct Registration {
    // Constants: the name parsing runs in the compiler, not in the program (nor is it emitted).
    static constexpr std::string_view name = function_name<F>();
    static constexpr std::string_view signature_text =
        type_name<std::remove_pointer_t<decltype(F)>>();
    static constexpr std::uint64_t signature = fnv1a(signature_text);
    static inline const bool done =
        register_function(FunctionEntry{name, signature, signature_text, &invoke<F>});
};

template <class Tuple>
struct all_serializable;
template <class... A>
struct all_serializable<std::tuple<A...>> {
    static constexpr bool value = (argument_must_be_serializable<A>::value && ... && true);
};

}  // namespace detail

/// The value behind sky::compute<F>: call it to get a PendingCompute, or `.local(...)` to run now.
template <auto F>
requires std::is_function_v<std::remove_pointer_t<decltype(F)>>
class ComputeFunction {
    using traits = detail::function_traits<decltype(F)>;

public:
    /// The decayed result type of F.
    using result_type = std::decay_t<typename traits::result>;

    /// Binds and encodes the arguments; nothing runs until the result meets a pool.
    template <class... A>
    requires(sizeof...(A) == traits::arity &&
             std::is_invocable_v<decltype(F), A...>) PendingCompute<result_type>
    operator()(A&&... a) const {
        static_assert(detail::all_serializable<typename traits::args>::value);
        static_assert(detail::argument_must_be_serializable<result_type>::value);
        (void)detail::Registration<F>::done;  // instantiates the static registration
        auto args = detail::make_shared_buffer();
        if constexpr (sizeof...(A) > 0) {
            encode(*args, std::forward<A>(a)...);
        }
        detail::CallDesc d;
        d.function = name();
        d.signature = signature_hash();
        d.args = std::move(args);
        return PendingCompute<result_type>(std::move(d));
    }

    /// Runs F here, now, with no serialization.
    template <class... A>
    requires std::is_invocable_v<decltype(F), A...>
    decltype(auto) local(A&&... a) const { return std::invoke(F, std::forward<A>(a)...); }

    /// Qualified name under which F is registered, e.g. "stats::mean".
    static constexpr std::string_view name() noexcept { return detail::Registration<F>::name; }
    /// Hash of F's signature; a worker refuses a call whose hash differs.
    static constexpr std::uint64_t signature_hash() noexcept {
        return detail::Registration<F>::signature;
    }

private:
    template <class... A>
    static void encode(detail::Buffer& out, A&&... a) {
        encode_impl(out, std::make_index_sequence<sizeof...(A)>{}, std::forward<A>(a)...);
    }
    template <std::size_t... I, class... A>
    static void encode_impl(detail::Buffer& out, std::index_sequence<I...>, A&&... a) {
        detail::save_to(out, detail::as_param<std::tuple_element_t<I, typename traits::args>>(
                                 std::forward<A>(a))...);
    }
};

/// sky::compute<f>: the remote form of the free (or static member) function f.
template <auto F>
inline constexpr ComputeFunction<F> compute{};

/// A registered function as listed by registered_functions().
struct FunctionInfo {
    std::string name;       ///< e.g. "stats::mean"
    std::string signature;  ///< e.g. "double(std::vector<double>)"
    std::uint64_t signature_hash = 0;
};

/// Every function registered in this program (used with sky::compute somewhere), by name.
std::vector<FunctionInfo> registered_functions();

SKY_PUBLIC_END
