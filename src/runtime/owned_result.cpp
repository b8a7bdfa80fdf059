// The hand-over between a function's thunk (save_result, in the user's translation unit) and the
// worker's executor on the same thread: the thunk's signature (registry.hpp, Invoker) has only
// the result buffer, so what follows it travels through this thread's slot. And the spare
// vector: a handed-over result, once written, kept for the next large argument of its type.
#include "runtime/owned_result.hpp"

#include <mutex>
#include <stdexcept>
#include <utility>

#include "sky/detail/serialize.hpp"

namespace sky::detail {

namespace {
struct Pending {
    const Buffer* out = nullptr;
    std::size_t at = 0;  // out's size at the hand-over: the bytes follow exactly there
    OwnedBytes bytes;
};
thread_local Pending pending;
}  // namespace

void append_owned_result(Buffer& out, const std::byte* data, std::size_t size, void* owner,
                         void (*destroy)(void*)) noexcept {
    pending.bytes = OwnedBytes(data, size, owner, destroy);
    pending.out = &out;
    pending.at = out.size();
}

OwnedBytes take_owned_result(const Buffer& out) {
    OwnedBytes b = std::move(pending.bytes);
    const bool mine = pending.out == &out;
    const std::size_t at = pending.at;
    pending.out = nullptr;
    if (!mine || b.empty()) return {};
    if (at != out.size())
        throw std::logic_error("a result's bytes were appended after its handed-over part");
    return b;
}

namespace {
// One vector at most, and not a huge one: what a worker keeps beyond what its calls hold.
constexpr std::size_t spare_limit = std::size_t{1} << 30;
struct Spare {
    std::mutex m;
    void (*destroy)(void*) = nullptr;  // names the vector's type
    void* vector = nullptr;
    std::size_t capacity = 0;
};
Spare& spare() {
    static Spare* s = new Spare();  // never destroyed: results may be freed during exit
    return *s;
}
}  // namespace

void keep_spare_vector(void (*destroy)(void*), void* vector, std::size_t capacity_bytes) noexcept {
    void (*drop)(void*) = destroy;
    void* dropped = vector;
    if (capacity_bytes <= spare_limit) {
        auto& s = spare();
        std::lock_guard lk(s.m);
        if (!s.vector || s.capacity <= capacity_bytes) {  // the larger one serves more sizes
            drop = s.destroy;
            dropped = s.vector;
            s.destroy = destroy;
            s.vector = vector;
            s.capacity = capacity_bytes;
        }
    }
    if (dropped) drop(dropped);  // outside the lock: unmapping a large block takes a while
}

void* take_spare_vector(void (*destroy)(void*), std::size_t bytes) noexcept {
    auto& s = spare();
    std::lock_guard lk(s.m);
    // Not one much larger than asked: the argument may stay with the user's code.
    if (!s.vector || s.destroy != destroy || s.capacity < bytes || s.capacity > 2 * bytes)
        return nullptr;
    s.capacity = 0;
    s.destroy = nullptr;
    return std::exchange(s.vector, nullptr);
}

}  // namespace sky::detail
