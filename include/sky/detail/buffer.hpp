#pragma once
// A byte buffer that grows in place (realloc: large blocks are remapped, not copied). sky's
// archives write into it (sky/detail/serialize.hpp).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

namespace detail {

/// Memory for Buffers. Large blocks are kept in a small cache when freed: fresh memory costs a
/// page fault per page (measured here: ~0.5 ms per MiB, 5x a memcpy), so reusing a block is
/// what makes repeated large transfers fast. Defined in libsky.
void* buffer_realloc(void* p, std::size_t old_capacity, std::size_t n);
void buffer_free(void* p, std::size_t capacity) noexcept;
/// Asks for transparent huge pages behind [p, p + n), memory about to be written for the first
/// time (a large result decoded into a fresh vector): one page fault per 2 MiB instead of one
/// per 4 KiB. A no-op for small ranges, where the kernel cannot, or with SKY_HUGE_PAGES=0.
void prefer_huge_pages(void* p, std::size_t n) noexcept;
/// The bytes usable in a block from buffer_realloc (malloc may round up). Defined in libsky, so
/// that this header needs no <malloc.h>.
std::size_t buffer_usable_size(void* p) noexcept;

class Buffer {
public:
    Buffer() = default;
    explicit Buffer(std::size_t reserve_bytes) { reserve(reserve_bytes); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)),
          size_(std::exchange(o.size_, 0)),
          cap_(std::exchange(o.cap_, 0)) {}
    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            buffer_free(data_, cap_);
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            cap_ = std::exchange(o.cap_, 0);
        }
        return *this;
    }
    ~Buffer() { buffer_free(data_, cap_); }

    [[nodiscard]] std::byte* data() noexcept { return data_; }
    [[nodiscard]] const std::byte* data() const noexcept { return data_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    [[nodiscard]] std::span<const std::byte> span() const noexcept { return {data_, size_}; }
    [[nodiscard]] std::span<std::byte> span() noexcept { return {data_, size_}; }

    void reserve(std::size_t n) {
        if (n <= cap_) return;
        void* p = buffer_realloc(data_, cap_, n);
        if (!p) throw std::bad_alloc();
        data_ = static_cast<std::byte*>(p);
        // The block may be larger than asked (a cached large block, malloc's rounding): a buffer
        // grown step by step (FrameReader's large payloads) then fills it instead of shrinking
        // it with the next realloc.
        cap_ = std::max(n, buffer_usable_size(p));
    }
    /// Sets the size without initialising new bytes (they are about to be overwritten).
    void resize(std::size_t n) {
        if (n > cap_) reserve(cap_ == 0 ? n : grow_to(n));
        size_ = n;
    }
    void clear() noexcept { size_ = 0; }
    void append(const void* p, std::size_t n) {
        if (n == 0) return;
        if (size_ + n > cap_) reserve(grow_to(size_ + n));
        std::memcpy(data_ + size_, p, n);
        size_ += n;
    }
    void push_back(std::byte b) { append(&b, 1); }
    /// Drops the first n bytes (keeps the rest at the front).
    void consume(std::size_t n) noexcept {
        if (n >= size_) {
            size_ = 0;
            return;
        }
        std::memmove(data_, data_ + n, size_ - n);
        size_ -= n;
    }

private:
    [[nodiscard]] std::size_t grow_to(std::size_t need) const noexcept {
        std::size_t c = cap_ ? cap_ : 256;
        while (c < need) c += c / 2 + 64;
        return c;
    }
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t cap_ = 0;
};

}  // namespace detail

SKY_PUBLIC_END
