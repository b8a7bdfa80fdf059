// The large-block cache behind sky::detail::Buffer (see buffer.hpp for why).
#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "sky/detail/buffer.hpp"

namespace sky::detail {

namespace {
constexpr std::size_t large_block = std::size_t{1} << 20;  // below this malloc is cheap enough
constexpr std::size_t cache_slots = 4;
constexpr std::size_t cache_limit = std::size_t{1} << 30;  // most bytes kept

struct Cache {
    std::mutex m;
    void* block[cache_slots] = {};
    std::size_t size[cache_slots] = {};
    std::size_t total = 0;
};
Cache& cache() {
    static Cache* c = new Cache();  // never destroyed: Buffers may die during static destruction
    return *c;
}

// The smallest cached block of at least n bytes.
void* take(std::size_t n, std::size_t& got) {
    auto& c = cache();
    std::lock_guard lk(c.m);
    int best = -1;
    for (std::size_t i = 0; i < cache_slots; ++i)
        if (c.block[i] && c.size[i] >= n && (best < 0 || c.size[i] < c.size[best]))
            best = static_cast<int>(i);
    if (best < 0) return nullptr;
    void* p = c.block[best];
    got = c.size[best];
    c.block[best] = nullptr;
    c.total -= got;
    return p;
}
}  // namespace

void* buffer_realloc(void* p, std::size_t old_capacity, std::size_t n) {
    if (n >= large_block) {
        std::size_t got = 0;
        // Only worth it when nothing (or little) has to be copied over.
        if (old_capacity < large_block) {
            if (void* b = take(n, got)) {
                if (p) {
                    std::memcpy(b, p, old_capacity);
                    std::free(p);
                }
                return b;
            }
        }
    }
    void* q = std::realloc(p, n);
    // A large block's first transfer writes it for the first time: huge pages make that cheaper.
    if (q && n >= (std::size_t{4} << 20)) prefer_huge_pages(q, n);
    return q;
}

std::size_t buffer_usable_size(void* p) noexcept { return ::malloc_usable_size(p); }

void buffer_free(void* p, std::size_t capacity) noexcept {
    if (!p) return;
    if (capacity >= large_block && capacity <= cache_limit) {
        auto& c = cache();
        std::lock_guard lk(c.m);
        // Replace the smallest entry if the cache is full; keep the total bounded.
        int slot = -1;
        for (std::size_t i = 0; i < cache_slots; ++i)
            if (!c.block[i]) {
                slot = static_cast<int>(i);
                break;
            }
        if (slot < 0) {
            slot = 0;
            for (std::size_t i = 1; i < cache_slots; ++i)
                if (c.size[i] < c.size[slot]) slot = static_cast<int>(i);
            if (c.size[slot] >= capacity) {
                std::free(p);
                return;
            }
            std::free(c.block[slot]);
            c.total -= c.size[slot];
            c.block[slot] = nullptr;
        }
        while (c.total + capacity > cache_limit) {
            int big = -1;
            for (std::size_t i = 0; i < cache_slots; ++i)
                if (c.block[i] && (big < 0 || c.size[i] > c.size[big])) big = static_cast<int>(i);
            if (big < 0) break;
            std::free(c.block[big]);
            c.total -= c.size[big];
            c.block[big] = nullptr;
        }
        c.block[slot] = p;
        c.size[slot] = capacity;
        c.total += capacity;
        return;
    }
    std::free(p);
}

void prefer_huge_pages(void* p, std::size_t n) noexcept {
    constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
    static const bool enabled = [] {
        const char* v = std::getenv("SKY_HUGE_PAGES");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    if (!enabled || !p || n < 2 * huge) return;
    // Only whole huge pages inside the range: the memory around it is someone else's.
    const auto begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) & ~(huge - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(huge - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace sky::detail
