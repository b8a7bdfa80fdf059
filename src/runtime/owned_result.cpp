// The hand-over between a function's thunk (save_result, in the user's translation unit) and the
// worker's executor on the same thread: the thunk's signature (registry.hpp, Invoker) has only
// the result buffer, so what follows it travels through this thread's slot.
#include "runtime/owned_result.hpp"

#include <stdexcept>

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

}  // namespace sky::detail
