#include "ship/closure.hpp"

#include <fmt/format.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "sky/errors.hpp"
#include "util/digest.hpp"

namespace sky::detail::ship {

namespace {

std::string hash_file_content(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + p.string() + " to ship it");
    Sha256 hash;
    std::vector<char> buf(1 << 20);
    while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
        hash.update({buf.data(), static_cast<std::size_t>(f.gcount())});
        if (!f) break;
    }
    if (f.bad()) throw std::runtime_error("error reading " + p.string() + " to ship it");
    return hash.finish_hex();
}

// The per-user cache of file hashes: a line per file, "sha256 size mtime_ns inode device path".
class HashCache {
public:
    static HashCache& instance() {
        static HashCache c;
        return c;
    }

    std::string get(const std::filesystem::path& p) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0)
            throw std::runtime_error("cannot stat " + p.string() + " to ship it");
        Key k{static_cast<std::uint64_t>(st.st_size),
              static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
              static_cast<std::uint64_t>(st.st_ino), static_cast<std::uint64_t>(st.st_dev)};
        {
            std::lock_guard lk(m_);
            load();
            auto it = entries_.find(p.string());
            if (it != entries_.end() && it->second.first == k) return it->second.second;
        }
        std::string h = hash_file_content(p);
        // A file that changed while it was hashed is not recorded: the next start hashes again.
        struct stat after {};
        if (::stat(p.c_str(), &after) == 0 && after.st_size == st.st_size &&
            after.st_mtim.tv_sec == st.st_mtim.tv_sec &&
            after.st_mtim.tv_nsec == st.st_mtim.tv_nsec) {
            std::lock_guard lk(m_);
            entries_[p.string()] = {k, h};
            save();
        }
        return h;
    }

private:
    struct Key {
        std::uint64_t size;
        std::int64_t mtime_ns;
        std::uint64_t ino;
        std::uint64_t dev;
        friend bool operator==(const Key&, const Key&) = default;
    };

    static std::filesystem::path file() {
        const char* home = std::getenv("HOME");
        if (!home || !*home) return {};
        return std::filesystem::path(home) / ".sky" / "cache" / "file-hashes";
    }

    void load() {
        if (loaded_) return;
        loaded_ = true;
        auto f = file();
        if (f.empty()) return;
        std::ifstream in(f);
        std::string line;
        for (int n = 0; n < 100000 && std::getline(in, line); ++n) {
            std::istringstream is(line);
            std::string h;
            Key k{};
            if (!(is >> h >> k.size >> k.mtime_ns >> k.ino >> k.dev)) continue;
            std::string path;
            is.get();
            std::getline(is, path);
            if (h.size() != 64 || path.empty()) continue;
            entries_[path] = {k, h};
        }
    }

    void save() {
        auto f = file();
        if (f.empty()) return;
        std::error_code ec;
        std::filesystem::create_directories(f.parent_path(), ec);
        ::chmod(f.parent_path().parent_path().c_str(), 0700);
        ::chmod(f.parent_path().c_str(), 0700);
        auto tmp = f;
        tmp += fmt::format(".{}", ::getpid());
        {
            std::ofstream out(tmp, std::ios::trunc);
            if (!out) return;  // a cache that cannot be written only costs time
            for (auto& [path, e] : entries_)
                if (path.find('\n') == std::string::npos)
                    out << e.second << ' ' << e.first.size << ' ' << e.first.mtime_ns << ' '
                        << e.first.ino << ' ' << e.first.dev << ' ' << path << '\n';
        }
        std::filesystem::rename(tmp, f, ec);
        if (ec) std::filesystem::remove(tmp, ec);
    }

    std::mutex m_;
    bool loaded_ = false;
    std::map<std::string, std::pair<Key, std::string>> entries_;
};

}  // namespace

std::uint64_t Manifest::total_bytes() const {
    std::uint64_t n = 0;
    for (auto& f : files) n += f.size;
    return n;
}

bool is_node_provided(std::string_view name) {
    // glibc: the C library, its loader and the libraries built with it. The node's own are used
    // (its version is checked against what the program needs).
    static constexpr std::array<std::string_view, 19> glibc = {"libc.so",
                                                               "libm.so",
                                                               "libpthread.so",
                                                               "libdl.so",
                                                               "librt.so",
                                                               "libresolv.so",
                                                               "libutil.so",
                                                               "libmvec.so",
                                                               "libanl.so",
                                                               "libnsl.so",
                                                               "libnss_",
                                                               "libthread_db.so",
                                                               "libBrokenLocale.so",
                                                               "libcidn.so",
                                                               "libmemusage.so",
                                                               "libpcprofile.so",
                                                               "libc_malloc_debug.so",
                                                               "ld-linux",
                                                               "ld64.so"};
    // GPU drivers: user-space halves of the kernel driver, which must match it.
    static constexpr std::array<std::string_view, 10> driver = {
        "libcuda.so",       "libcudadebugger.so",  "libnvidia-",
        "libnvcuvid.so",    "libnvoptix.so",       "libGLX_nvidia.so",
        "libEGL_nvidia.so", "libGLESv2_nvidia.so", "libGLESv1_CM_nvidia.so",
        "linux-vdso.so"};
    for (auto p : glibc)
        if (name.starts_with(p)) return true;
    for (auto p : driver)
        if (name.starts_with(p)) return true;
    return name.starts_with("linux-gate.so");
}

std::vector<LoadedObject> loaded_objects() {
    std::vector<LoadedObject> out;
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) -> int {
            auto& v = *static_cast<std::vector<LoadedObject>*>(data);
            // The program itself comes first with an empty name; the vDSO has no file.
            if (!info->dlpi_name || !*info->dlpi_name) return 0;
            std::filesystem::path p(info->dlpi_name);
            // The vDSO is listed by name ("linux-vdso.so.1") with no file behind it; a library
            // found through a relative LD_LIBRARY_PATH entry has a relative name.
            std::error_code ec;
            if (!std::filesystem::is_regular_file(p, ec)) return 0;
            v.push_back({p.filename().string(), std::filesystem::absolute(p, ec)});
            return 0;
        },
        &out);
    return out;
}

std::string file_sha256(const std::filesystem::path& file) {
    return HashCache::instance().get(file);
}

Manifest make_manifest(const std::filesystem::path& program,
                       const std::vector<LoadedObject>& libs) {
    Manifest m;
    auto add = [&](std::string name, const std::filesystem::path& path) {
        std::error_code ec;
        auto real = std::filesystem::canonical(path, ec);
        // A program rebuilt or deleted while it runs is "/path (deleted)" in /proc/self/exe.
        if (ec)
            throw Error(
                fmt::format("cannot ship {} to the nodes: {} (was it deleted or rebuilt "
                            "while the program ran?)",
                            path.string(), ec.message()));
        ShippedFile f;
        f.name = std::move(name);
        f.source = real;
        try {
            f.size = std::filesystem::file_size(real);
            f.sha256 = file_sha256(real);
        } catch (const std::exception& e) {
            throw Error(fmt::format("cannot ship {} to the nodes: {}", real.string(), e.what()));
        }
        if (auto v = glibc_needed(real); v && m.glibc < *v) m.glibc = *v;
        m.files.push_back(std::move(f));
    };
    add(program.filename().string(), program);
    std::map<std::string, bool> seen;
    for (auto& lib : libs) {
        if (is_node_provided(lib.name) || seen[lib.name]) continue;
        seen[lib.name] = true;
        add("lib/" + lib.name, lib.path);
    }
    // The program directory is named by everything in it: a changed file is a new directory.
    std::string all;
    for (auto& f : m.files) all += f.name + '\t' + f.sha256 + '\n';
    m.id = sha256_hex(all).substr(0, 32);
    return m;
}

const Manifest& this_program() {
    static const Manifest m = [] {
        // The program's real path, as this process sees it (not a name looked up in PATH).
        auto exe = std::filesystem::read_symlink("/proc/self/exe");
        return make_manifest(exe, loaded_objects());
    }();
    return m;
}

}  // namespace sky::detail::ship
