#include "util/private_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sky/errors.hpp"

namespace sky::detail {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

void ensure_private_dir(const fs::path& dir) {
    // mkdir -p with 0700 for every missing component (~/.sky included when sky makes it).
    fs::path partial;
    for (const auto& part : dir) {
        partial /= part;
        if (partial == partial.root_path()) continue;
        if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
            throw Error("cannot create " + partial.string() + ": " + errno_text(errno));
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
        throw Error("cannot read " + dir.string() + ": " + errno_text(errno));
    if (!S_ISDIR(st.st_mode)) throw Error(dir.string() + " is not a directory");
    if (st.st_uid != ::geteuid())
        throw Error(dir.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
                    "): refusing to keep sky's records there");
    if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
        throw Error("cannot make " + dir.string() + " private: " + errno_text(errno));
}

bool is_private_dir(const fs::path& dir, std::string* why) {
    struct stat st {};
    const char* problem = nullptr;
    if (::lstat(dir.c_str(), &st) != 0)
        problem = "cannot be read";
    else if (!S_ISDIR(st.st_mode))
        problem = "not a directory";
    else if (st.st_uid != ::geteuid())
        problem = "another user's";
    else if ((st.st_mode & 022) != 0)
        problem = "writable by others";
    if (problem && why) *why = dir.string() + ": not trusted (" + problem + ")";
    return problem == nullptr;
}

std::string read_private_file(const fs::path& file, std::size_t max_bytes) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) throw Error("cannot read " + file.string() + ": " + errno_text(errno));
    std::string text;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::size_t>(st.st_size) > max_bytes) {
        ::close(fd);
        throw Error(file.string() + ": not a regular file, or too large");
    }
    if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
        ::close(fd);
        throw Error(file.string() + ": not trusted (owned by another user or writable by others)");
    }
    char buf[8192];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > max_bytes) break;
    }
    ::close(fd);
    return text;
}

}  // namespace sky::detail
