#pragma once
// cereal binary serialization into sky::detail::Buffer, and the concept that names what can travel.
// The archives are made and destroyed in libsky (src/runtime/serialize.cpp): a user's translation
// unit instantiates only the saving and loading of its own types. cereal's support for the
// standard containers, strings, std::optional, std::variant, std::tuple, std::pair and
// std::chrono is included here (api.md §1); smart pointers (<cereal/types/memory.hpp>, which
// brings cereal's polymorphism registry into every translation unit) and std::complex
// (<cereal/types/complex.hpp>) are included by the programs that send them.
#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/chrono.hpp>
#include <cereal/types/deque.hpp>
#include <cereal/types/list.hpp>
#include <cereal/types/map.hpp>
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
#include <deque>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "sky/detail/buffer.hpp"
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

namespace sky::detail {

/// A cereal input archive over a span of bytes that never trusts a size read from them: every
/// size tag (string length, element count) larger than the bytes left is refused before anything
/// is allocated, and vectors of non-numbers grow as their elements arrive instead of being
/// resized up front. It reads what cereal::BinaryOutputArchive writes. Every frame from a peer
/// is decoded with it, so a hostile or broken peer gets a cereal::Exception, never a multi-GiB
/// allocation. (Every element of a non-empty type takes at least one byte; a vector of more
/// than "bytes left" elements of an empty type is refused too, which is the price of the bound.)
class BoundedInputArchive
    : public cereal::InputArchive<BoundedInputArchive, cereal::AllowEmptyClassElision> {
public:
    // Made and destroyed in libsky: cereal's archive base is instantiated there, not in every
    // translation unit that decodes a value.
    explicit BoundedInputArchive(std::span<const std::byte> bytes);
    ~BoundedInputArchive();
    BoundedInputArchive(const BoundedInputArchive&) = delete;
    BoundedInputArchive& operator=(const BoundedInputArchive&) = delete;

    /// Copies `size` bytes out; throws cereal::Exception when fewer are left.
    void loadBinary(void* const data, std::streamsize size) {
        const auto n = static_cast<std::size_t>(size);
        if (size < 0 || n > remaining()) throw_short(size);
        if (n) std::memcpy(data, at_, n);
        at_ += n;
    }
    /// Bytes not read yet.
    [[nodiscard]] std::size_t remaining() const noexcept {
        return static_cast<std::size_t>(end_ - at_);
    }
    /// Throws when a count claims more elements of `element_bytes` each than the bytes left.
    void check_count(std::uint64_t count, std::size_t element_bytes = 1) const {
        if (count > remaining() / (element_bytes ? element_bytes : 1)) throw_too_many(count);
    }

private:
    [[noreturn]] void throw_short(std::streamsize size) const;
    [[noreturn]] void throw_too_many(std::uint64_t count) const;

    const std::byte* at_;
    const std::byte* end_;
};

/// Numbers: their bytes as they are (little-endian hosts only, as the frame header).
template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, T& t) {
    ar.loadBinary(std::addressof(t), sizeof(t));
}
[[noreturn]] void throw_bad_bool(std::uint8_t v);
/// A bool is one byte, 0 or 1; another value is refused (read as a bool it would be undefined
/// behaviour: found by fuzz_frames in an std::optional's flag).
inline void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, bool& b) {
    std::uint8_t v = 0;
    ar.loadBinary(&v, 1);
    if (v > 1) throw_bad_bool(v);
    b = v != 0;
}
/// Names are not on the wire.
template <class T>
void CEREAL_SERIALIZE_FUNCTION_NAME(BoundedInputArchive& ar, cereal::NameValuePair<T>& t) {
    ar(t.value);
}
/// The one place sizes come in: checked against the bytes left before anyone allocates.
template <class T>
void CEREAL_SERIALIZE_FUNCTION_NAME(BoundedInputArchive& ar, cereal::SizeTag<T>& t) {
    ar(t.size);
    ar.check_count(static_cast<std::uint64_t>(t.size));
}
/// Raw bytes (strings, vectors of numbers).
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, cereal::BinaryData<T>& bd) {
    ar.loadBinary(bd.data, static_cast<std::streamsize>(bd.size));
}
/// Vectors: numbers are checked against their real size on the wire; other elements are
/// appended one by one, so memory follows the bytes actually decoded, whatever sizeof(T) is.
template <class T, class A>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, std::vector<T, A>& v) {
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        ar.check_count(n, sizeof(T));
        v.resize(static_cast<std::size_t>(n));
        ar(cereal::binary_data(v.data(), static_cast<std::size_t>(n) * sizeof(T)));
    } else {
        v.clear();
        for (cereal::size_type i = 0; i < n; ++i) {
            v.emplace_back();
            ar(v.back());
        }
    }
}
/// std::deque and std::list: cereal resizes them to the count before the first
/// element is read (the count is bounded by the bytes left, but not by what an element takes in
/// memory: a 64-byte element per byte of input); here they grow as their elements arrive.
template <class T, class A>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, std::deque<T, A>& d) {
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    d.clear();
    for (cereal::size_type i = 0; i < n; ++i) ar(d.emplace_back());
}
template <class T, class A>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, std::list<T, A>& l) {
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    l.clear();
    for (cereal::size_type i = 0; i < n; ++i) ar(l.emplace_back());
}
/// std::vector<bool>: one byte per element.
template <class A>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, std::vector<bool, A>& v) {
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    v.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) {
        bool b = false;
        ar(b);
        v[i] = b;
    }
}

}  // namespace sky::detail

// Polymorphic types registered with cereal work through the bounded archive too, and cereal's
// load/save pairing checks find the output archive that writes what it reads.
CEREAL_REGISTER_ARCHIVE(sky::detail::BoundedInputArchive)
namespace cereal::traits::detail {
template <>
struct get_output_from_input<sky::detail::BoundedInputArchive> {
    using type = cereal::BinaryOutputArchive;
};
}  // namespace cereal::traits::detail

namespace sky {

namespace detail {

/// A std::vector of numbers: cereal writes it as a 64-bit count and the raw elements.
template <class T>
struct is_flat_vector : std::false_type {};
template <class T, class A>
struct is_flat_vector<std::vector<T, A>>
    : std::bool_constant<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>> {};

/// The types sky writes and reads itself, byte for byte as cereal's binary archive does (a
/// number: its bytes; a vector of numbers or a std::string: a 64-bit count, then the raw
/// elements): a call whose arguments and result are all of them instantiates none of cereal's
/// machinery, which is most of what a call costs to compile. (bool stays with cereal, whose
/// bounded loader refuses a byte other than 0 or 1.)
template <class T>
inline constexpr bool is_plain_number = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool is_direct =
    is_plain_number<T> || is_flat_vector<T>::value || std::is_same_v<T, std::string>;

}  // namespace detail

/// A type that can be an argument or a result of a remote function: cereal can save and load it.
template <class T>
concept serializable = std::is_same_v<T, void> || detail::is_direct<T> ||
    (cereal::traits::is_output_serializable<T, cereal::BinaryOutputArchive>::value&&
         cereal::traits::is_input_serializable<T, detail::BoundedInputArchive>::value&&
             std::is_default_constructible_v<T>);

namespace detail {

/// A cereal binary output archive that appends to a Buffer. Made and destroyed in libsky (the
/// stream behind it too), so a translation unit instantiates only the saving of its own types.
class Encoder {
public:
    explicit Encoder(Buffer& out);
    ~Encoder();
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;
    [[nodiscard]] cereal::BinaryOutputArchive& archive() noexcept { return *archive_; }

private:
    struct State;
    std::unique_ptr<State> state_;
    cereal::BinaryOutputArchive* archive_;
};

/// Appends one value of a direct type (is_direct) as cereal's binary archive would.
template <class T>
void save_direct(Buffer& out, const T& value) {
    if constexpr (is_plain_number<T>) {
        out.append(&value, sizeof value);
    } else {
        const std::uint64_t n = value.size();
        out.append(&n, sizeof n);
        if (n) out.append(value.data(), value.size() * sizeof(typename T::value_type));
    }
}

/// Appends the cereal binary form of each value to `out`.
template <class... Ts>
void save_to(Buffer& out, const Ts&... values) {
    if constexpr ((is_direct<Ts> && ...)) {
        (save_direct(out, values), ...);
    } else {
        Encoder e(out);
        e.archive()(values...);
    }
}

/// Hands bytes that follow `out`'s on the wire to the worker that is encoding a result into
/// `out`: [data, data + size), kept alive by `owner` until `destroy(owner)`. The worker writes
/// them from where they are and destroys the owner once the frame is written (or, in a session
/// that may resume, acknowledged). Defined in libsky (src/runtime/owned_result.cpp).
void append_owned_result(Buffer& out, const std::byte* data, std::size_t size, void* owner,
                         void (*destroy)(void*)) noexcept;
/// Results of numbers at least this large are handed over (moved), not copied into the frame:
/// the worker's outbox writes frames this large straight to the socket anyway.
inline constexpr std::size_t owned_result_bytes = std::size_t{256} << 10;

/// A large vector of numbers the worker is done with (a result, once written) is kept, one at a
/// time, for the next large argument of its type, whose memory is then already faulted in: fresh
/// memory costs more than the copy into it, and glibc maps blocks of 64 MiB or more afresh on
/// every call of an executor thread (docs/performance.md). `destroy` names the vector's type and
/// frees one not kept. Defined in libsky (src/runtime/owned_result.cpp).
void keep_spare_vector(void (*destroy)(void*), void* vector, std::size_t capacity_bytes) noexcept;
/// The kept vector of the type `destroy` names when its capacity fits `bytes`, else null.
void* take_spare_vector(void (*destroy)(void*), std::size_t bytes) noexcept;
/// Frees a vector handed around as void* (and names its type to the spare's functions).
template <class V>
void delete_vector(void* v) {
    delete static_cast<V*>(v);
}
/// What frees a handed-over result vector once it is written: keeps it as the spare, or frees it.
template <class V>
void retire_vector(void* v) {
    keep_spare_vector(&delete_vector<V>, v,
                      static_cast<V*>(v)->capacity() * sizeof(typename V::value_type));
}

/// Appends a remote function's result `r` (the thunk's last step): save_to, except that a large
/// vector of numbers is moved out of `r` and handed over (append_owned_result), not copied.
template <class R>
void save_result(Buffer& out, R& r) {
    if constexpr (is_flat_vector<R>::value) {
        const std::uint64_t n = r.size();
        if (n * sizeof(typename R::value_type) >= owned_result_bytes) {
            auto* kept = new R(std::move(r));
            out.append(&n, sizeof n);
            append_owned_result(out, reinterpret_cast<const std::byte*>(kept->data()),
                                n * sizeof(typename R::value_type), kept, &retire_vector<R>);
            return;
        }
    }
    save_to(out, r);
}

/// Reads values saved by save_to with a BoundedInputArchive; throws cereal::Exception when the
/// bytes run out or a size does not fit in them (never allocates more than they can fill).
template <class... Ts>
void load_from(std::span<const std::byte> bytes, Ts&... values) {
    BoundedInputArchive ar(bytes);
    ar(values...);
}

[[noreturn]] void throw_vector_too_long(std::uint64_t count, std::size_t bytes);
[[noreturn]] void throw_string_too_long(std::uint64_t count, std::size_t bytes);
[[noreturn]] void throw_short_read(std::size_t wanted, std::size_t left);

/// Loads one value from the front of `bytes` and returns how many bytes it took. A direct type
/// is read here, checked against the bytes left; a vector of numbers whose elements are aligned
/// in `bytes` is built straight from them: one pass, where cereal would zero-fill the vector
/// first and then copy into it.
template <class T>
std::size_t load_one(std::span<const std::byte> bytes, T& value) {
    if constexpr (is_plain_number<T>) {
        if (bytes.size() < sizeof(T)) throw_short_read(sizeof(T), bytes.size());
        std::memcpy(&value, bytes.data(), sizeof(T));
        return sizeof(T);
    } else if constexpr (std::is_same_v<T, std::string>) {
        std::uint64_t n = 0;
        if (bytes.size() >= 8) std::memcpy(&n, bytes.data(), 8);
        if (bytes.size() < 8 || bytes.size() - 8 < n) throw_string_too_long(n, bytes.size());
        value.assign(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n));
        return 8 + static_cast<std::size_t>(n);
    } else if constexpr (is_flat_vector<T>::value) {
        using E = typename T::value_type;
        std::uint64_t n = 0;
        if (bytes.size() >= 8) std::memcpy(&n, bytes.data(), 8);
        // A count the bytes cannot hold is refused before anything is allocated (and before any
        // pointer arithmetic: an empty span's data() may be null).
        if (bytes.size() < 8 || (bytes.size() - 8) / sizeof(E) < n)
            throw_vector_too_long(n, bytes.size());
        const std::byte* first = bytes.data() + 8;
        if (reinterpret_cast<std::uintptr_t>(first) % alignof(E) == 0) {
            const E* p = reinterpret_cast<const E*>(first);
            if (n * sizeof(E) >= (std::size_t{4} << 20)) {
                // Fresh memory: faulting it in costs more than the copy (docs/performance.md).
                if (void* spare = take_spare_vector(&delete_vector<T>, n * sizeof(E))) {
                    value = std::move(*static_cast<T*>(spare));
                    delete static_cast<T*>(spare);
                } else {
                    value.clear();
                    value.reserve(static_cast<std::size_t>(n));
                    prefer_huge_pages(value.data(), static_cast<std::size_t>(n) * sizeof(E));
                }
            }
            value.assign(p, p + n);
        } else {
            value.resize(static_cast<std::size_t>(n));
            if (n) std::memcpy(value.data(), first, static_cast<std::size_t>(n) * sizeof(E));
        }
        return 8 + static_cast<std::size_t>(n) * sizeof(E);
    } else {
        BoundedInputArchive ar(bytes);
        ar(value);
        return bytes.size() - ar.remaining();
    }
}

/// Like load_from, taking the direct path of load_one for numbers, strings and vectors of
/// numbers (one archive for all values otherwise: cereal writes a versioned type's version once
/// per archive).
template <class... Ts>
void load_each(std::span<const std::byte> bytes, Ts&... values) {
    if constexpr ((is_direct<Ts> && ...) || (is_flat_vector<Ts>::value || ...)) {
        ((bytes = bytes.subspan(load_one(bytes, values))), ...);
    } else {
        load_from(bytes, values...);
    }
}

}  // namespace detail
}  // namespace sky

SKY_PUBLIC_END
