#pragma once
// cereal binary serialization into sky::detail::Buffer, and the concept that names what can travel.
#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/chrono.hpp>
#include <cereal/types/complex.hpp>
#include <cereal/types/deque.hpp>
#include <cereal/types/list.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/memory.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/set.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/unordered_map.hpp>
#include <cereal/types/unordered_set.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/variant.hpp>
#include <cereal/types/vector.hpp>
#include <cstdint>
#include <cstring>
#include <istream>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>

#include "sky/detail/buffer.hpp"

namespace sky {

/// A type that can be an argument or a result of a remote function: cereal can save and load it.
template <class T>
concept serializable = std::is_same_v<T, void> ||
    (cereal::traits::is_output_serializable<T, cereal::BinaryOutputArchive>::value&&
         cereal::traits::is_input_serializable<T, cereal::BinaryInputArchive>::value&&
             std::is_default_constructible_v<T>);

namespace detail {

/// Appends the cereal binary form of each value to `out`.
template <class... Ts>
void save_to(Buffer& out, const Ts&... values) {
    BufferWriter sb(out);
    std::ostream os(&sb);
    cereal::BinaryOutputArchive ar(os);
    ar(values...);
}

/// Reads values saved by save_to; throws cereal::Exception when the bytes run out.
template <class... Ts>
void load_from(std::span<const std::byte> bytes, Ts&... values) {
    SpanReader sb(bytes);
    std::istream is(&sb);
    cereal::BinaryInputArchive ar(is);
    ar(values...);
}

/// A std::vector of numbers: cereal writes it as a 64-bit count and the raw elements.
template <class T>
struct is_flat_vector : std::false_type {};
template <class T, class A>
struct is_flat_vector<std::vector<T, A>>
    : std::bool_constant<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>> {};

/// Loads one value from the front of `bytes` and returns how many bytes it took. A vector of
/// numbers whose elements are aligned in `bytes` is built straight from them: one pass, where
/// cereal would zero-fill the vector first and then copy into it.
template <class T>
std::size_t load_one(std::span<const std::byte> bytes, T& value) {
    if constexpr (is_flat_vector<T>::value) {
        using E = typename T::value_type;
        std::uint64_t n = 0;
        if (bytes.size() >= 8) std::memcpy(&n, bytes.data(), 8);
        const std::byte* first = bytes.data() + 8;
        // A count the bytes cannot hold is refused before anything is allocated.
        if (bytes.size() < 8 || (bytes.size() - 8) / sizeof(E) < n)
            throw cereal::Exception("a vector of " + std::to_string(n) +
                                    " elements does not fit in the " +
                                    std::to_string(bytes.size()) + " bytes left");
        if (reinterpret_cast<std::uintptr_t>(first) % alignof(E) == 0) {
            const E* p = reinterpret_cast<const E*>(first);
            value.assign(p, p + n);
            return 8 + static_cast<std::size_t>(n) * sizeof(E);
        }
    }
    SpanReader sb(bytes);
    std::istream is(&sb);
    cereal::BinaryInputArchive ar(is);
    ar(value);
    return bytes.size() - sb.remaining();
}

/// Like load_from, taking the fast path of load_one for vectors of numbers.
template <class... Ts>
void load_each(std::span<const std::byte> bytes, Ts&... values) {
    if constexpr ((is_flat_vector<Ts>::value || ...)) {
        ((bytes = bytes.subspan(load_one(bytes, values))), ...);
    } else {
        load_from(bytes, values...);
    }
}

}  // namespace detail
}  // namespace sky
