#include "runtime/build_id.hpp"

#include <elf.h>

#include <cstring>

namespace sky::detail {

std::size_t build_id_bytes(const dl_phdr_info& info, unsigned char* out, std::size_t cap) noexcept {
    for (int i = 0; i < info.dlpi_phnum; ++i) {
        const auto& ph = info.dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        auto* p = reinterpret_cast<const unsigned char*>(info.dlpi_addr + ph.p_vaddr);
        auto* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
                std::size_t n = nh->n_descsz < cap ? nh->n_descsz : cap;
                std::memcpy(out, desc, n);
                return n;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

std::string build_id_hex(const dl_phdr_info& info) {
    unsigned char id[64];
    const std::size_t n = build_id_bytes(info, id, sizeof id);
    static constexpr char digits[] = "0123456789abcdef";
    std::string hex;
    for (std::size_t i = 0; i < n; ++i) {
        hex += digits[id[i] >> 4];
        hex += digits[id[i] & 15];
    }
    return hex;
}

}  // namespace sky::detail
