#include "ship/elf.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace sky::detail::ship {

namespace {

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
    throw std::runtime_error("ELF file " + file.string() + ": " + what);
}

void read_at(const Fd& f, const std::filesystem::path& file, std::uint64_t size, void* out,
             std::size_t n, std::uint64_t offset) {
    if (offset > size || n > size - offset) bad(file, "a table lies outside the file");
    auto* p = static_cast<char*>(out);
    while (n > 0) {
        ssize_t got = ::pread(f.fd, p, n, static_cast<off_t>(offset));
        if (got <= 0) bad(file, "cannot read");
        p += got;
        n -= static_cast<std::size_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
}

}  // namespace

std::optional<GlibcVersion> glibc_needed(const std::filesystem::path& file) {
    Fd f;
    f.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0) bad(file, std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) bad(file, std::strerror(errno));
    const auto size = static_cast<std::uint64_t>(st.st_size);
    Elf64_Ehdr eh{};
    if (size < sizeof eh) return std::nullopt;
    read_at(f, file, size, &eh, sizeof eh, 0);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return std::nullopt;
    if (eh.e_shoff == 0 || eh.e_shnum == 0) return std::nullopt;
    if (eh.e_shentsize != sizeof(Elf64_Shdr)) bad(file, "unexpected section header size");
    if (eh.e_shnum > 65000) bad(file, "too many sections");
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    read_at(f, file, size, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff);

    std::optional<GlibcVersion> newest;
    for (const auto& s : sh) {
        if (s.sh_type != SHT_GNU_verneed) continue;
        if (s.sh_link >= sh.size()) bad(file, "version section links to no string table");
        const auto& strtab = sh[s.sh_link];
        if (s.sh_size > (64u << 20) || strtab.sh_size > (64u << 20))
            bad(file, "version tables are implausibly large");
        std::vector<unsigned char> need(s.sh_size);
        std::vector<char> str(strtab.sh_size + 1, '\0');
        read_at(f, file, size, need.data(), need.size(), s.sh_offset);
        read_at(f, file, size, str.data(), strtab.sh_size, strtab.sh_offset);
        auto name_at = [&](std::uint64_t off) -> const char* {
            if (off >= strtab.sh_size) bad(file, "a version name lies outside its string table");
            return str.data() + off;
        };
        std::uint64_t off = 0;
        for (int entries = 0; entries < 4096; ++entries) {
            if (off + sizeof(Elf64_Verneed) > need.size()) bad(file, "truncated version needs");
            Elf64_Verneed vn;
            std::memcpy(&vn, need.data() + off, sizeof vn);
            std::uint64_t aux = off + vn.vn_aux;
            for (unsigned i = 0; i < vn.vn_cnt && i < 4096; ++i) {
                if (aux + sizeof(Elf64_Vernaux) > need.size()) bad(file, "truncated version needs");
                Elf64_Vernaux va;
                std::memcpy(&va, need.data() + aux, sizeof va);
                int major = 0, minor = 0;
                if (std::sscanf(name_at(va.vna_name), "GLIBC_%d.%d", &major, &minor) == 2) {
                    GlibcVersion v{major, minor};
                    if (!newest || *newest < v) newest = v;
                }
                if (va.vna_next == 0) break;
                aux += va.vna_next;
            }
            if (vn.vn_next == 0) break;
            off += vn.vn_next;
        }
    }
    return newest;
}

}  // namespace sky::detail::ship
