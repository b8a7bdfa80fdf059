#pragma once
// A record of which calls ran on a host, kept in a file of the host's own /tmp: tests of a
// dropped link check from it that every call ran exactly once.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace sky::test {

/// Appends `id` as one line (one O_APPEND write, so concurrent calls do not interleave).
inline void append_run(const char* file, int id) {
    const int fd = ::open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string line = std::to_string(id) + "\n";
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
}

/// The ids append_run wrote to `file`, in order.
inline std::vector<int> runs_in(const char* file) {
    std::vector<int> runs;
    std::ifstream f(file);
    for (int id; f >> id;) runs.push_back(id);
    return runs;
}

}  // namespace sky::test
