#include "node/local_shell.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "io/fd_stream.hpp"
#include "runtime/fd_transport.hpp"
#include "util/env.hpp"
#include "util/subprocess.hpp"

namespace sky::detail::node {

LocalShell::LocalShell() {
    home_ = env_or("HOME");
    const passwd* p = ::getpwuid(::geteuid());
    if (home_.empty() && p) home_ = p->pw_dir;
    user_ = p ? p->pw_name : env_or("USER");
    if (home_.empty() || user_.empty())
        throw Error("cannot learn this machine's home directory and user");
}

CommandOutcome LocalShell::run(const std::vector<std::string>& argv, const RunOptions& options) {
    SubprocessOptions o;
    o.timeout = options.timeout.count() > 0 ? options.timeout : std::chrono::hours(24 * 365);
    o.output_cap = 16u << 20;
    o.stdin_data = options.stdin_data;
    if (options.on_stdout) o.on_line = options.on_stdout;
    auto r = run_subprocess(argv, o);
    CommandOutcome out{r.status, options.on_stdout ? std::string() : std::move(r.output),
                       std::move(r.errors), r.timed_out};
    if (options.on_stderr) {
        std::istringstream is(out.err);
        for (std::string l; std::getline(is, l);) options.on_stderr(l);
        out.err.clear();
    }
    return out;
}

void LocalShell::upload(const ByteSource& read, const std::string& path, int mode,
                        const std::function<void(std::uint64_t)>& progress) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                          static_cast<mode_t>(mode & 0600));
    if (fd < 0) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    std::uint64_t done = 0;
    try {
        std::byte buf[1 << 16];
        for (std::size_t n; (n = read(buf, sizeof buf)) > 0;) {
            for (std::size_t at = 0; at < n;) {
                const ssize_t w = ::write(fd, buf + at, n - at);
                if (w < 0 && errno == EINTR) continue;
                if (w < 0)
                    throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
                at += static_cast<std::size_t>(w);
            }
            done += n;
            if (progress) progress(done);
        }
        if (::fchmod(fd, static_cast<mode_t>(mode)) != 0)
            throw Error(fmt::format("cannot set the mode of {}: {}", path, std::strerror(errno)));
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

std::unique_ptr<io::Stream> LocalShell::open_channel(const std::string& host, std::uint16_t port,
                                                     std::chrono::milliseconds timeout) {
    const int fd = connect_tcp(host, port, timeout);
    return std::make_unique<io::FdStream>(fd, fmt::format("tcp to {}:{}", host, port));
}

}  // namespace sky::detail::node
