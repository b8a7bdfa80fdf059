// A call's arguments from hostile bytes, through the worker's path: the call payload (its plugin
// block and header) decoded, the function found in the registry, and its invoker decoding the
// arguments (load_each: cereal's bounded archive and the in-place path for vectors of numbers).
// Expected: sky::Error or cereal::Exception (what the worker turns into a bad_arguments error).
// Oracles: a result re-encodes to the same bytes after a decode (the client's take<R>), and the
// memory live during a decode stays within a small multiple of the argument bytes, whatever the
// size fields claim (an allocation bomb is a finding even when it stays under libFuzzer's limit).
#include <malloc.h>

#include <cereal/details/helpers.hpp>  // cereal::Exception: what the bounded decoder throws
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

#include "fuzz/fuzz_common.hpp"
#include "runtime/protocol.hpp"
#include "sky/compute.hpp"
#include "sky/detail/call.hpp"

// ---- Memory accounting: the bytes allocated and not freed while `armed`, and their peak. With
// ASan (SKY_FUZZ builds) through its malloc hooks; otherwise by replacing operator new/delete.
#if defined(__SANITIZE_ADDRESS__)
#define SKY_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKY_FUZZ_ASAN 1
#endif
#endif

namespace {
bool armed = false;
std::size_t live = 0;
std::size_t peak = 0;
void count_alloc(std::size_t n) {
    if (!armed) return;
    live += n;
    peak = std::max(peak, live);
}
void count_free(std::size_t n) {
    if (armed) live = live > n ? live - n : 0;
}
}  // namespace

#ifdef SKY_FUZZ_ASAN
#if __has_include(<sanitizer/allocator_interface.h>)
#include <sanitizer/allocator_interface.h>
#else
// gcc ships no allocator_interface.h, but its ASan runtime exports the same hooks (the asan
// preset builds this target with gcc).
extern "C" {
std::size_t __sanitizer_get_allocated_size(const volatile void* p);
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                  std::size_t),
                                              void (*free_hook)(const volatile void*));
}
#endif
namespace {
void on_malloc(const volatile void*, std::size_t n) { count_alloc(n); }
void on_free(const volatile void* p) {
    if (p) count_free(__sanitizer_get_allocated_size(const_cast<const void*>(p)));
}
const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
namespace {
void* counted_alloc(std::size_t n, std::size_t align = 0) {
    void* p = align > alignof(std::max_align_t)
                  ? std::aligned_alloc(align, (n + align - 1) / align * align)
                  : std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    count_alloc(malloc_usable_size(p));
    return p;
}
void counted_free(void* p) noexcept {
    if (!p) return;
    count_free(malloc_usable_size(p));
    std::free(p);
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a) {
    return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
#endif

// ---- The registered functions: each returns what it received, so its result can be checked.
namespace fuzzfn {

struct Record {
    std::string name;
    std::vector<float> xs;
    std::map<std::string, std::vector<std::int64_t>> tags;
    std::variant<int, std::string, std::vector<double>> value;
    std::set<int> ids;
    std::pair<double, std::uint8_t> weight;
    std::optional<std::array<std::int16_t, 3>> shape;

    template <class A>
    void serialize(A& ar) {
        ar(name, xs, tags, value, ids, weight, shape);
    }
};

std::tuple<std::string, std::vector<double>, std::int32_t> scalars(std::string s,
                                                                   std::vector<double> xs,
                                                                   std::int32_t n) {
    return {std::move(s), std::move(xs), n};
}
std::tuple<std::vector<std::vector<double>>, std::vector<bool>, std::optional<std::string>> nested(
    std::vector<std::vector<double>> m, std::vector<bool> mask, std::optional<std::string> label) {
    return {std::move(m), std::move(mask), std::move(label)};
}
Record record(Record r) { return r; }
std::tuple<std::list<std::string>, std::deque<std::array<double, 8>>> sequences(
    std::list<std::string> names, std::deque<std::array<double, 8>> rows) {
    return {std::move(names), std::move(rows)};
}
std::size_t hashed(std::unordered_map<std::string, int> counts) { return counts.size(); }
std::tuple<std::vector<double>, std::vector<std::uint16_t>, std::vector<double>> flat(
    std::vector<double> a, std::vector<std::uint16_t> b, std::vector<double> c) {
    return {std::move(a), std::move(b), std::move(c)};
}

}  // namespace fuzzfn

namespace {

using sky::detail::Buffer;

struct Target {
    std::string_view name;
    std::uint64_t signature;
    void (*check_result)(const Buffer& out);
};

// take<R> as the client does it; the decoded result must re-encode to the same bytes.
template <auto F>
void roundtrip(const Buffer& out) {
    using R = typename sky::ComputeFunction<F>::result_type;
    sky::detail::Outcome o;
    o.result.append(out.data(), out.size());
    R r = sky::detail::take<R>(o);
    Buffer again;
    sky::detail::save_to(again, r);
    sky::fuzz::check(
        again.size() == out.size() &&
            (out.size() == 0 || std::memcmp(again.data(), out.data(), out.size()) == 0),
        "a result does not re-encode to the bytes it was decoded from");
}
void no_check(const Buffer&) {}

template <auto F>
Target target(void (*check_result)(const Buffer&) = &roundtrip<F>) {
    (void)sky::detail::Registration<F>::done;
    return {sky::compute<F>.name(), sky::compute<F>.signature_hash(), check_result};
}

const std::vector<Target>& targets() {
    static const std::vector<Target> all = {
        target<fuzzfn::scalars>(),   target<fuzzfn::nested>(),          target<fuzzfn::record>(),
        target<fuzzfn::sequences>(), target<fuzzfn::hashed>(&no_check), target<fuzzfn::flat>(),
    };
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace sky::detail;
    if (size < 2) return 0;
    // Byte 0: the function (or a raw payload), byte 1: the call frame's flags and the payload's
    // alignment. The rest: the arguments (or the whole payload).
    const auto& all = targets();
    const std::uint8_t pick = data[0];
    const std::uint16_t flags = data[1] & call_flag_plugin;
    const std::size_t offset = (data[1] >> 1) & 7;
    const std::span<const std::byte> rest{reinterpret_cast<const std::byte*>(data + 2), size - 2};

    Buffer frame;  // [offset bytes][payload], so the payload starts at any alignment
    frame.resize(offset);
    if (pick < 0xf0) {
        const Target& t = all[pick % all.size()];
        if (flags) append_call_plugin(frame, CallPlugin{1, "torch", 0});
        append_call_header(frame, t.name, t.signature);
    }
    frame.append(rest.data(), rest.size());
    const std::span<const std::byte> payload = frame.span().subspan(offset);

    CallHeader call;
    bool decoded = false;
    sky::fuzz::expect_typed([&] {
        CallPlugin plugin;
        call = decode_call(decode_call_plugin(payload, flags, plugin));
        decoded = true;
    });
    if (!decoded) return 0;
    const Lookup l = find_function(call.function, call.signature);
    if (!l.entry) return 0;
    const Target* t = nullptr;
    for (const auto& c : all)
        if (c.name == l.entry->name) t = &c;
    sky::fuzz::check(t != nullptr, "the registry found a function this target did not register");

    Buffer out;
    bool ok = false;
#ifdef SKY_FUZZ_ASAN
    (void)hooks_installed;
#endif
    live = peak = 0;
    armed = true;
    sky::fuzz::expect_typed<cereal::Exception>([&] {
        l.entry->invoke(call.args, out);
        ok = true;
    });
    armed = false;
    // Decoded objects and the result's encoding: a few times the argument bytes, never what a
    // size field claims (32x covers a node-based container's per-element overhead).
    const std::size_t allowed = 32 * call.args.size() + (64 << 10);
    if (peak > allowed)
        sky::fuzz::finding("decoding " + std::to_string(call.args.size()) + " argument bytes of " +
                           std::string(t->name) + " had " + std::to_string(peak) +
                           " bytes live (allowed " + std::to_string(allowed) + ")");
    if (ok) t->check_result(out);
    return 0;
}
