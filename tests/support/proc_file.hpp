#pragma once
/// \file Reading a file under /proc of a process that may end while it is read. std::ifstream
/// with std::istreambuf_iterator throws from libstdc++'s underflow when read(2) fails (ESRCH once
/// the process is gone); with the suite's tests running side by side, processes of other tests
/// come and go under every scan of /proc.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <sstream>
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

/// Child processes of this process (a pool's workers), zombies counted only when asked; -1 when
/// /proc cannot be read.
inline int count_children(bool zombies) {
    const long me = ::getpid();
    int count = 0;
    DIR* d = ::opendir("/proc");
    if (!d) return -1;
    for (int seen = 0; seen < 1000000; ++seen) {
        const dirent* e = ::readdir(d);
        if (!e) break;
        const std::string name = e->d_name;
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        const std::string stat = read_proc_file("/proc/" + name + "/stat");
        const auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 1));
        std::string state;
        long ppid = 0;
        rest >> state >> ppid;
        if (ppid == me && (zombies || state != "Z")) ++count;
    }
    ::closedir(d);
    return count;
}

}  // namespace sky::test
