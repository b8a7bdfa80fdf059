#pragma once
// A large result that a function's thunk handed over instead of copying it into the result frame
// (sky/detail/serialize.hpp, save_result): the worker writes it from where the function returned
// it and frees it once nothing needs it any more.
#include <cstddef>
#include <span>
#include <utility>

#include "sky/detail/buffer.hpp"

namespace sky::detail {

/// Bytes that live in an object of their own, destroyed with it. Move-only.
class OwnedBytes {
public:
    OwnedBytes() = default;
    OwnedBytes(const std::byte* data, std::size_t size, void* owner,
               void (*destroy)(void*)) noexcept
        : data_(data), size_(size), owner_(owner), destroy_(destroy) {}
    OwnedBytes(OwnedBytes&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)),
          size_(std::exchange(o.size_, 0)),
          owner_(std::exchange(o.owner_, nullptr)),
          destroy_(std::exchange(o.destroy_, nullptr)) {}
    OwnedBytes& operator=(OwnedBytes&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            owner_ = std::exchange(o.owner_, nullptr);
            destroy_ = std::exchange(o.destroy_, nullptr);
        }
        return *this;
    }
    OwnedBytes(const OwnedBytes&) = delete;
    OwnedBytes& operator=(const OwnedBytes&) = delete;
    ~OwnedBytes() { reset(); }

    [[nodiscard]] std::span<const std::byte> span() const noexcept { return {data_, size_}; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

private:
    void reset() noexcept {
        if (owner_ && destroy_) destroy_(owner_);
        data_ = nullptr;
        size_ = 0;
        owner_ = nullptr;
        destroy_ = nullptr;
    }
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    void* owner_ = nullptr;
    void (*destroy_)(void*) = nullptr;
};

/// The bytes that append_owned_result handed over on this thread while a result was encoded
/// into `out` (they follow out's bytes on the wire); empty when none were. What was handed over
/// for another buffer is dropped. Throws std::logic_error when bytes were appended to `out`
/// after the hand-over (their order on the wire would be wrong).
OwnedBytes take_owned_result(const Buffer& out);

}  // namespace sky::detail
