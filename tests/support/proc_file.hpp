#pragma once
/// \file Reading a file under /proc of a process that may end while it is read. std::ifstream
/// with std::istreambuf_iterator throws from libstdc++'s underflow when read(2) fails (ESRCH once
/// the process is gone); with the suite's tests running side by side, processes of other tests
/// come and go under every scan of /proc.
#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace sky::test {

/// The whole file, or what could be read of it ("" when the process is gone).
inline std::string read_proc_file(const std::string& path) {
    std::string out;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    char buf[4096];
    for (int i = 0; i < 4096; ++i) {  // at most 16 MiB
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

}  // namespace sky::test
