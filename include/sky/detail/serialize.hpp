#pragma once
// sky's binary archive: what travels (arguments, results, protocol messages) is written into a
// sky::detail::Buffer by OutputArchive and read back by BoundedInputArchive, byte for byte the
// format of cereal's binary archive (a number: its bytes; a size: 64 bits; an optional: a
// "nullopt" bool, then the value; a variant: a 32-bit index, then the value; ...). A user type
// takes part as it does with cereal: a `serialize` member or free function (or `save`/`load`),
// written against any archive `ar` and calling `ar(a, b, ...)`. The archives are sky's own so
// that a program's translation unit includes none of cereal (its core alone cost more to
// compile than the standard headers a program uses: docs/performance.md); cereal's helper
// types (cereal::make_nvp, cereal::binary_data, cereal::base_class) still work in a
// serialize() for programs that include cereal themselves. What the archives read is bounded
// by the bytes they are given: a hostile or broken peer gets a cereal::Exception (thrown in
// libsky), never a multi-GiB allocation.
#include <array>
#include <cereal/access.hpp>  // small: lets a type keep its serialize private (friend cereal::access)
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "sky/archive.hpp"
#include "sky/detail/buffer.hpp"
#include "sky/export.hpp"

// cereal's helper types, declared so that a serialize() written with them works with sky's
// archives (only in a program that includes cereal: nothing here defines them).
namespace cereal {
template <class T>
class NameValuePair;
template <class T>
struct BinaryData;
template <class T>
class SizeTag;
template <class Base>
struct base_class;
template <class Base>
struct virtual_base_class;
}  // namespace cereal

SKY_PUBLIC_BEGIN

namespace detail {

// The bounded decoder's errors, thrown as cereal::Exception from libsky (out of line: their
// messages are built there, not in every translation unit).
[[noreturn]] void throw_short_read(std::size_t wanted, std::size_t left);
[[noreturn]] void throw_too_many(std::uint64_t count, std::size_t left);
[[noreturn]] void throw_bad_bool(std::uint8_t v);
[[noreturn]] void throw_bad_index(std::uint64_t index, std::size_t alternatives);
[[noreturn]] void throw_decode_error(const char* what);
[[noreturn]] void throw_vector_too_long(std::uint64_t count, std::size_t bytes);

namespace ser {

template <class T, template <class...> class Tmpl>
inline constexpr bool is_a = false;
template <class... A, template <class...> class Tmpl>
inline constexpr bool is_a<Tmpl<A...>, Tmpl> = true;

template <class T>
inline constexpr bool is_std_array = false;
template <class T, std::size_t N>
inline constexpr bool is_std_array<std::array<T, N>> = true;

template <class T>
inline constexpr bool is_duration = false;
template <class R, class P>
inline constexpr bool is_duration<std::chrono::duration<R, P>> = true;
template <class T>
inline constexpr bool is_time_point = false;
template <class C, class D>
inline constexpr bool is_time_point<std::chrono::time_point<C, D>> = true;

/// A number stored as its bytes (bool is checked when read: a byte other than 0 or 1 is
/// refused, it would be undefined behaviour as a bool).
template <class T>
inline constexpr bool is_number = std::is_arithmetic_v<T>;

// Containers are recognised by their shape, so that this header needs none of <deque>,
// <list>, <set>, <unordered_map> ...: a map (key_type and mapped_type), a set (key_type), a
// sequence that grows at its back (std::deque, std::list).
template <class T>
concept map_like = requires(T& m) {
    typename T::key_type;
    typename T::mapped_type;
    m.size();
    m.clear();
    m.begin()->second;
};
template <class T>
concept set_like = !map_like<T> && requires(T & s, typename T::key_type k) {
    s.size();
    s.clear();
    s.emplace(std::move(k));
};
template <class T>
concept sequence_like = requires(T& s) {
    typename T::value_type;
    s.size();
    s.clear();
    s.emplace_back();
    s.begin();
};
template <class T>
concept complex_like = requires(const T& c) {
    typename T::value_type;
    c.real();
    c.imag();
    T(c.real(), c.imag());
};

// The user's serialize/save/load (cereal's forms: with or without a version, as members, which
// may be private to a type that befriends cereal::access, or found by argument-dependent
// lookup; these declarations keep ordinary lookup from finding anything else).
void serialize() = delete;
void save() = delete;
void load() = delete;
template <class A, class T>
concept member_serialize = requires(A& a, T& t) {
    cereal::access::member_serialize(a, t);
};
template <class A, class T>
concept member_save = requires(A& a, const T& t) {
    cereal::access::member_save(a, t);
};
template <class A, class T>
concept member_load = requires(A& a, T& t) {
    cereal::access::member_load(a, t);
};
template <class A, class T>
concept free_serialize = requires(A& a, T& t) {
    serialize(a, t);
};
template <class A, class T>
concept free_save = requires(A& a, const T& t) {
    save(a, t);
};
template <class A, class T>
concept free_load = requires(A& a, T& t) {
    load(a, t);
};
template <class A, class T>
concept member_serialize_v = requires(A& a, T& t, std::uint32_t v) {
    cereal::access::member_serialize(a, t, v);
};
template <class A, class T>
concept member_save_v = requires(A& a, const T& t, std::uint32_t v) {
    cereal::access::member_save(a, t, v);
};
template <class A, class T>
concept member_load_v = requires(A& a, T& t, std::uint32_t v) {
    cereal::access::member_load(a, t, v);
};
template <class A, class T>
concept free_serialize_v = requires(A& a, T& t, std::uint32_t v) {
    serialize(a, t, v);
};
template <class A, class T>
concept free_save_v = requires(A& a, const T& t, std::uint32_t v) {
    save(a, t, v);
};
template <class A, class T>
concept free_load_v = requires(A& a, T& t, std::uint32_t v) {
    load(a, t, v);
};

/// A user type the archive `A` writes (when saving) or reads (when loading), and whether its
/// function takes cereal's class version.
template <class A, class T>
concept unversioned_user = member_serialize<A, T> || free_serialize<A, T> ||
                           (A::is_saving::value && (member_save<A, T> || free_save<A, T>)) ||
                           (A::is_loading::value && (member_load<A, T> || free_load<A, T>));
template <class A, class T>
concept versioned_user = member_serialize_v<A, T> || free_serialize_v<A, T> ||
                         (A::is_saving::value && (member_save_v<A, T> || free_save_v<A, T>)) ||
                         (A::is_loading::value && (member_load_v<A, T> || free_load_v<A, T>));
template <class A, class T>
concept user_type = unversioned_user<A, T> || versioned_user<A, T>;

/// Calls the user's function for T with `ar` (and the version, for a versioned one).
template <class A, class T>
void call_user(A& ar, T& v, [[maybe_unused]] std::uint32_t version) {
    if constexpr (member_serialize<A, T>)
        cereal::access::member_serialize(ar, v);
    else if constexpr (member_serialize_v<A, T>)
        cereal::access::member_serialize(ar, v, version);
    else if constexpr (free_serialize<A, T>)
        serialize(ar, v);
    else if constexpr (free_serialize_v<A, T>)
        serialize(ar, v, version);
    else if constexpr (A::is_saving::value && member_save<A, T>)
        cereal::access::member_save(ar, static_cast<const T&>(v));
    else if constexpr (A::is_saving::value && member_save_v<A, T>)
        cereal::access::member_save(ar, static_cast<const T&>(v), version);
    else if constexpr (A::is_saving::value && free_save<A, T>)
        save(ar, static_cast<const T&>(v));
    else if constexpr (A::is_saving::value && free_save_v<A, T>)
        save(ar, static_cast<const T&>(v), version);
    else if constexpr (!A::is_saving::value && member_load<A, T>)
        cereal::access::member_load(ar, v);
    else if constexpr (!A::is_saving::value && member_load_v<A, T>)
        cereal::access::member_load(ar, v, version);
    else if constexpr (!A::is_saving::value && free_load<A, T>)
        load(ar, v);
    else
        load(ar, v, version);
}

/// The class version sky's archives write for T (sky::class_version, sky/archive.hpp).
template <class T>
constexpr std::uint32_t version_of() {
    return ::sky::class_version<T>;
}

/// A key per type, for the "version written once per archive" rule.
template <class T>
inline constexpr char type_key = 0;

}  // namespace ser

class OutputArchive;
class BoundedInputArchive;

/// The class versions an archive has written or read: cereal puts a versioned type's version
/// once per archive, before the type's first value. Its storage is in libsky (most archives
/// never meet a versioned type, and no container of it is compiled in each program).
class VersionTable {
public:
    VersionTable() noexcept = default;
    VersionTable(const VersionTable&) = delete;
    VersionTable& operator=(const VersionTable&) = delete;
    ~VersionTable() {
        if (entries_) release();
    }
    /// The version recorded for `key` (a type's address key), or null.
    [[nodiscard]] const std::uint32_t* find(const void* key) const noexcept;
    /// Records `version` for `key`.
    void add(const void* key, std::uint32_t version);

private:
    void release() noexcept;
    struct Entries;
    Entries* entries_ = nullptr;
};

/// True when T can be written and read by sky's archives (elements of containers included).
template <class T>
constexpr bool can_travel() noexcept;

/// An archive that appends to a Buffer, as cereal's BinaryOutputArchive would write.
class OutputArchive {
public:
    using is_loading = std::false_type;
    using is_saving = std::true_type;

    explicit OutputArchive(Buffer& out) noexcept : out_(out) {}
    OutputArchive(const OutputArchive&) = delete;
    OutputArchive& operator=(const OutputArchive&) = delete;

    /// Writes each value in turn.
    template <class... Ts>
    OutputArchive& operator()(const Ts&... values) {
        (write(values), ...);
        return *this;
    }
    template <class T>
    OutputArchive& operator&(const T& value) {
        write(value);
        return *this;
    }
    template <class T>
    OutputArchive& operator<<(const T& value) {
        write(value);
        return *this;
    }
    /// Appends raw bytes.
    void saveBinary(const void* data, std::size_t size) { out_.append(data, size); }

    template <class T>
    void write(const T& v) {
        using namespace ser;
        if constexpr (is_number<T>) {
            saveBinary(&v, sizeof v);
        } else if constexpr (std::is_enum_v<T>) {
            write(static_cast<std::underlying_type_t<T>>(v));
        } else if constexpr (is_a<T, cereal::NameValuePair>) {
            write(v.value);
        } else if constexpr (is_a<T, cereal::BinaryData>) {
            saveBinary(v.data, static_cast<std::size_t>(v.size));
        } else if constexpr (is_a<T, cereal::SizeTag>) {
            write_size(static_cast<std::uint64_t>(v.size));
        } else if constexpr (is_a<T, cereal::base_class> || is_a<T, cereal::virtual_base_class>) {
            write_user(*v.base_ptr);
        } else if constexpr (std::is_same_v<T, std::string>) {
            write_size(v.size());
            saveBinary(v.data(), v.size());
        } else if constexpr (is_a<T, std::vector>) {
            using E = typename T::value_type;
            write_size(v.size());
            if constexpr (is_number<E> && !std::is_same_v<E, bool>) {
                saveBinary(v.data(), v.size() * sizeof(E));
            } else {
                for (const auto& e : v) write(static_cast<const E&>(e));
            }
        } else if constexpr (std::is_array_v<T> || is_std_array<T>) {
            using E = std::remove_cvref_t<decltype(v[0])>;
            if constexpr (is_number<E>)
                saveBinary(&v[0], sizeof(T));
            else
                for (const auto& e : v) write(e);
        } else if constexpr (is_a<T, std::pair>) {
            write(v.first);
            write(v.second);
        } else if constexpr (is_a<T, std::tuple>) {
            std::apply([this](const auto&... e) { (write(e), ...); }, v);
        } else if constexpr (is_a<T, std::optional>) {
            write(!v.has_value());  // cereal's "nullopt" flag
            if (v) write(*v);
        } else if constexpr (is_a<T, std::variant>) {
            write(static_cast<std::int32_t>(v.index()));
            std::visit([this](const auto& e) { write(e); }, v);
        } else if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (is_duration<T>) {
            write(v.count());
        } else if constexpr (is_time_point<T>) {
            write(v.time_since_epoch());
        } else if constexpr (is_a<T, std::unique_ptr>) {
            write(static_cast<std::uint8_t>(v ? 1 : 0));
            if (v) write(*v);
        } else if constexpr (is_a<T, std::shared_ptr>) {
            // cereal's form of a pointer written once: an id with the high bit set, the value.
            // (Sharing between pointers is not kept: each is its own copy on the other side.)
            write(static_cast<std::uint32_t>(v ? 0x80000001u : 0u));
            if (v) write(*v);
        } else if constexpr (user_type<OutputArchive, T>) {
            // After the standard types (whose checks are cheap), before the shapes a user's
            // container may also have: a std type never pays for the dozen user-function checks.
            write_user(v);
        } else if constexpr (complex_like<T>) {
            write(v.real());
            write(v.imag());
        } else if constexpr (map_like<T>) {
            write_size(v.size());
            for (const auto& kv : v) {
                write(kv.first);
                write(kv.second);
            }
        } else if constexpr (set_like<T> || sequence_like<T>) {
            write_size(v.size());
            for (const auto& e : v) write(e);
        } else {
            static_assert(can_travel<T>(), "sky: this type cannot be serialized");
        }
    }

private:
    void write_size(std::uint64_t n) { saveBinary(&n, sizeof n); }
    template <class T>
    void write_user(const T& v) {
        using namespace ser;
        std::uint32_t version = 0;
        if constexpr (!unversioned_user<OutputArchive, T>) {
            // As cereal: a versioned type's version goes before its first value in the archive.
            version = version_of<T>();
            if (!versions_.find(&type_key<T>)) {
                versions_.add(&type_key<T>, version);
                write(version);
            }
        }
        call_user(*this, const_cast<T&>(v), version);
    }

    Buffer& out_;
    VersionTable versions_;  // the versioned types written so far
};

/// An archive over a span of bytes that never trusts a size read from them: every size (string
/// length, element count) larger than the bytes left is refused before anything is allocated,
/// and containers of non-numbers grow as their elements arrive. It reads what OutputArchive (and
/// cereal's BinaryOutputArchive) writes; errors are cereal::Exception.
class BoundedInputArchive {
public:
    using is_loading = std::true_type;
    using is_saving = std::false_type;

    explicit BoundedInputArchive(std::span<const std::byte> bytes) noexcept
        : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}
    BoundedInputArchive(const BoundedInputArchive&) = delete;
    BoundedInputArchive& operator=(const BoundedInputArchive&) = delete;

    /// Reads each value in turn.
    template <class... Ts>
    BoundedInputArchive& operator()(Ts&&... values) {
        (read(values), ...);
        return *this;
    }
    template <class T>
    BoundedInputArchive& operator&(T&& value) {
        read(value);
        return *this;
    }
    template <class T>
    BoundedInputArchive& operator>>(T&& value) {
        read(value);
        return *this;
    }

    /// Copies `size` bytes out; throws cereal::Exception when fewer are left.
    void loadBinary(void* const data, std::size_t size) {
        if (size > remaining()) throw_short_read(size, remaining());
        if (size) std::memcpy(data, at_, size);
        at_ += size;
    }
    /// Bytes not read yet.
    [[nodiscard]] std::size_t remaining() const noexcept {
        return static_cast<std::size_t>(end_ - at_);
    }
    /// Throws when a count claims more elements of `element_bytes` each than the bytes left.
    void check_count(std::uint64_t count, std::size_t element_bytes = 1) const {
        if (count > remaining() / (element_bytes ? element_bytes : 1))
            throw_too_many(count, remaining());
    }

    template <class T>
    void read(T& v) {
        using namespace ser;
        if constexpr (std::is_same_v<T, bool>) {
            std::uint8_t b = 0;
            loadBinary(&b, 1);
            if (b > 1) throw_bad_bool(b);
            v = b != 0;
        } else if constexpr (is_number<T>) {
            loadBinary(&v, sizeof v);
        } else if constexpr (std::is_enum_v<T>) {
            std::underlying_type_t<T> u{};
            read(u);
            v = static_cast<T>(u);
        } else if constexpr (is_a<T, cereal::NameValuePair>) {
            read(v.value);
        } else if constexpr (is_a<T, cereal::BinaryData>) {
            loadBinary(const_cast<void*>(static_cast<const void*>(v.data)),
                       static_cast<std::size_t>(v.size));
        } else if constexpr (is_a<T, cereal::SizeTag>) {
            std::uint64_t n = read_size();
            v.size = static_cast<std::remove_reference_t<decltype(v.size)>>(n);
        } else if constexpr (is_a<T, cereal::base_class> || is_a<T, cereal::virtual_base_class>) {
            read_user(*v.base_ptr);
        } else if constexpr (std::is_same_v<T, std::string>) {
            const std::uint64_t n = read_size();
            v.resize(static_cast<std::size_t>(n));
            loadBinary(v.data(), static_cast<std::size_t>(n));
        } else if constexpr (is_a<T, std::vector>) {
            using E = typename T::value_type;
            const std::uint64_t n = read_size();
            if constexpr (is_number<E> && !std::is_same_v<E, bool>) {
                check_count(n, sizeof(E));
                v.resize(static_cast<std::size_t>(n));
                loadBinary(v.data(), static_cast<std::size_t>(n) * sizeof(E));
            } else if constexpr (std::is_same_v<E, bool>) {
                v.resize(static_cast<std::size_t>(n));
                for (std::size_t i = 0; i < v.size(); ++i) {
                    bool b = false;
                    read(b);
                    v[i] = b;
                }
            } else {
                // Grows as elements arrive: memory follows the bytes decoded, whatever
                // sizeof(E) is.
                v.clear();
                for (std::uint64_t i = 0; i < n; ++i) read(v.emplace_back());
            }
        } else if constexpr (std::is_array_v<T> || is_std_array<T>) {
            using E = std::remove_cvref_t<decltype(v[0])>;
            if constexpr (is_number<E> && !std::is_same_v<E, bool>)
                loadBinary(&v[0], sizeof(T));
            else
                for (auto& e : v) read(e);
        } else if constexpr (is_a<T, std::pair>) {
            read(const_cast<std::remove_const_t<typename T::first_type>&>(v.first));
            read(v.second);
        } else if constexpr (is_a<T, std::tuple>) {
            std::apply([this](auto&... e) { (read(e), ...); }, v);
        } else if constexpr (is_a<T, std::optional>) {
            bool nullopt = true;
            read(nullopt);
            if (nullopt) {
                v.reset();
            } else {
                v.emplace();
                read(*v);
            }
        } else if constexpr (is_a<T, std::variant>) {
            std::int32_t index = -1;
            read(index);
            read_variant(v, index, std::make_index_sequence<std::variant_size_v<T>>{});
        } else if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (is_duration<T>) {
            typename T::rep count{};
            read(count);
            v = T(count);
        } else if constexpr (is_time_point<T>) {
            typename T::duration d{};
            read(d);
            v = T(d);
        } else if constexpr (is_a<T, std::unique_ptr>) {
            std::uint8_t valid = 0;
            read(valid);
            if (!valid) {
                v.reset();
            } else {
                v = std::make_unique<typename T::element_type>();
                read(*v);
            }
        } else if constexpr (is_a<T, std::shared_ptr>) {
            std::uint32_t id = 0;
            read(id);
            if (id == 0) {
                v.reset();
            } else if (!(id & 0x80000000u)) {
                throw_decode_error("a shared pointer that refers to an earlier one");
            } else {
                auto p = std::make_shared<std::remove_const_t<typename T::element_type>>();
                read(*p);
                v = std::move(p);
            }
        } else if constexpr (user_type<BoundedInputArchive, T>) {
            read_user(v);
        } else if constexpr (complex_like<T>) {
            typename T::value_type re{}, im{};
            read(re);
            read(im);
            v = T(re, im);
        } else if constexpr (map_like<T>) {
            const std::uint64_t n = read_size();
            v.clear();
            for (std::uint64_t i = 0; i < n; ++i) {
                typename T::key_type k{};
                typename T::mapped_type m{};
                read(k);
                read(m);
                v.emplace(std::move(k), std::move(m));
            }
        } else if constexpr (set_like<T>) {
            const std::uint64_t n = read_size();
            v.clear();
            for (std::uint64_t i = 0; i < n; ++i) {
                typename T::key_type k{};
                read(k);
                v.emplace(std::move(k));
            }
        } else if constexpr (sequence_like<T>) {
            const std::uint64_t n = read_size();
            v.clear();
            for (std::uint64_t i = 0; i < n; ++i) read(v.emplace_back());
        } else {
            static_assert(can_travel<T>(), "sky: this type cannot be serialized");
        }
    }

private:
    /// A size: 64 bits, refused when larger than the bytes left (every element of a non-empty
    /// type takes at least one byte; a container of more than "bytes left" elements of an
    /// empty type is refused too, which is the price of the bound).
    std::uint64_t read_size() {
        std::uint64_t n = 0;
        loadBinary(&n, sizeof n);
        check_count(n);
        return n;
    }
    template <class T>
    void read_user(T& v) {
        using namespace ser;
        std::uint32_t version = 0;
        if constexpr (!unversioned_user<BoundedInputArchive, T>) {
            // The version the writer put before the type's first value, remembered for the rest.
            if (const std::uint32_t* known = versions_.find(&type_key<T>)) {
                version = *known;
            } else {
                read(version);
                versions_.add(&type_key<T>, version);
            }
        }
        call_user(*this, v, version);
    }
    template <class V, std::size_t... I>
    void read_variant(V& v, std::int32_t index, std::index_sequence<I...>) {
        if (index < 0 || static_cast<std::size_t>(index) >= sizeof...(I))
            throw_bad_index(static_cast<std::uint64_t>(index), sizeof...(I));
        (void)((static_cast<std::size_t>(index) == I ? (read(v.template emplace<I>()), true)
                                                     : false) ||
               ...);
    }

    const std::byte* at_;
    const std::byte* end_;
    VersionTable versions_;  // the versioned types read so far
};

template <class T>
constexpr bool can_travel() noexcept {
    using namespace ser;
    using O = OutputArchive;
    using I = BoundedInputArchive;
    if constexpr (std::is_reference_v<T> || std::is_pointer_v<T> || std::is_const_v<T> ||
                  std::is_void_v<T>) {
        return false;
    } else if constexpr (is_number<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> ||
                         std::is_same_v<T, std::monostate> || is_duration<T> || is_time_point<T>) {
        return true;
    } else if constexpr (std::is_array_v<T>) {
        return can_travel<std::remove_extent_t<T>>();
    } else if constexpr (is_a<T, std::pair>) {
        return can_travel<std::remove_const_t<typename T::first_type>>() &&
               can_travel<typename T::second_type>();
    } else if constexpr (is_a<T, std::tuple> || is_a<T, std::variant>) {
        return []<template <class...> class L, class... E>(std::type_identity<L<E...>>) {
            return (can_travel<E>() && ...);
        }(std::type_identity<T>{});
    } else if constexpr (is_a<T, std::optional> || is_a<T, std::vector> || is_std_array<T>) {
        return can_travel<typename T::value_type>();
    } else if constexpr (is_a<T, std::unique_ptr> || is_a<T, std::shared_ptr>) {
        return can_travel<std::remove_const_t<typename T::element_type>>() &&
               std::is_default_constructible_v<typename T::element_type>;
    } else if constexpr (user_type<O, T> && user_type<I, T>) {
        return true;
    } else if constexpr (complex_like<T>) {
        return can_travel<typename T::value_type>();
    } else if constexpr (map_like<T>) {
        return can_travel<typename T::key_type>() && can_travel<typename T::mapped_type>();
    } else if constexpr (set_like<T>) {
        return can_travel<typename T::key_type>();
    } else if constexpr (sequence_like<T>) {
        return can_travel<typename T::value_type>();
    } else {
        return false;
    }
}

}  // namespace detail

/// A type that can be an argument or a result of a remote function: sky's archives can write
/// and read it, and it can be made empty to be read into.
template <class T>
concept serializable = std::is_same_v<T, void> ||
    (detail::can_travel<T>() && std::is_default_constructible_v<T>);

namespace detail {

/// A std::vector of numbers: written as a 64-bit count and the raw elements.
template <class T>
struct is_flat_vector : std::false_type {};
template <class T, class A>
struct is_flat_vector<std::vector<T, A>>
    : std::bool_constant<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>> {};

/// Appends the binary form of each value to `out`.
template <class... Ts>
void save_to(Buffer& out, const Ts&... values) {
    OutputArchive ar(out);
    ar(values...);
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

/// Every standard number type a std::vector of which travels as its raw elements: for each,
/// libsky compiles the vector's decoding and result hand-over once (src/runtime/serialize.cpp),
/// so that a program passing or returning one does not compile them again.
// clang-format off
#define SKY_DETAIL_FOR_EACH_NUMBER(X)                                                     \
    X(char) X(signed char) X(unsigned char) X(wchar_t) X(char8_t) X(char16_t) X(char32_t) \
    X(short) X(unsigned short) X(int) X(unsigned int) X(long) X(unsigned long)            \
    X(long long) X(unsigned long long) X(float) X(double) X(long double)
// clang-format on

/// Appends a vector of numbers that a remote function returned: a large one is moved out of `r`
/// and handed over (append_owned_result), a small one copied.
template <class E, class A>
void save_flat_result(Buffer& out, std::vector<E, A>& r) {
    using R = std::vector<E, A>;
    const std::uint64_t n = r.size();
    if (n * sizeof(E) >= owned_result_bytes) {
        auto* kept = new R(std::move(r));
        out.append(&n, sizeof n);
        append_owned_result(out, reinterpret_cast<const std::byte*>(kept->data()), n * sizeof(E),
                            kept, &retire_vector<R>);
        return;
    }
    save_to(out, r);
}
#define SKY_DETAIL_DECLARE(E) void save_flat_result(Buffer& out, std::vector<E>& r);
SKY_DETAIL_FOR_EACH_NUMBER(SKY_DETAIL_DECLARE)
#undef SKY_DETAIL_DECLARE

/// Appends a remote function's result `r` (the thunk's last step): save_to, except that a large
/// vector of numbers is moved out of `r` and handed over, not copied.
template <class R>
void save_result(Buffer& out, R& r) {
    if constexpr (is_flat_vector<R>::value)
        save_flat_result(out, r);
    else
        save_to(out, r);
}

/// Reads values saved by save_to; throws cereal::Exception when the bytes run out or a size does
/// not fit in them (never allocates more than they can fill).
template <class... Ts>
void load_from(std::span<const std::byte> bytes, Ts&... values) {
    BoundedInputArchive ar(bytes);
    ar(values...);
}

/// Loads a vector of numbers (a 64-bit count, then the elements) from the front of `bytes`
/// and returns how many bytes it took. When the elements are aligned in `bytes`, the vector is
/// built straight from them: one pass, where resizing first would zero-fill it and then copy.
template <class E, class A>
std::size_t load_flat(std::span<const std::byte> bytes, std::vector<E, A>& value) {
    using T = std::vector<E, A>;
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
}
#define SKY_DETAIL_DECLARE(E) std::size_t load_flat(std::span<const std::byte>, std::vector<E>&);
SKY_DETAIL_FOR_EACH_NUMBER(SKY_DETAIL_DECLARE)
#undef SKY_DETAIL_DECLARE

/// Loads one value from the front of `bytes` and returns how many bytes it took (a vector of
/// numbers through load_flat).
template <class T>
std::size_t load_one(std::span<const std::byte> bytes, T& value) {
    if constexpr (is_flat_vector<T>::value) {
        return load_flat(bytes, value);
    } else {
        BoundedInputArchive ar(bytes);
        ar(value);
        return bytes.size() - ar.remaining();
    }
}

/// Like load_from, taking load_one's in-place path for the vectors of numbers among the values.
template <class... Ts>
void load_each(std::span<const std::byte> bytes, Ts&... values) {
    if constexpr ((is_flat_vector<Ts>::value || ...)) {
        ((bytes = bytes.subspan(load_one(bytes, values))), ...);
    } else {
        load_from(bytes, values...);
    }
}

}  // namespace detail

SKY_PUBLIC_END
