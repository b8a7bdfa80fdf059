#include "runtime/worker/listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "runtime/auth.hpp"

namespace sky::detail {

namespace {
void note_to_stderr(const std::string& msg) {
    std::fprintf(stderr, "sky worker %d: %s\n", static_cast<int>(::getpid()), msg.c_str());
}
}  // namespace

Listener::Listener(const std::string& where, std::string allow_from)
    : allow_from_(std::move(allow_from)) {
    if (where.rfind("unix:", 0) == 0) {
        const std::string path = where.substr(5);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        if (path.empty() || path[0] != '/' || path.size() >= sizeof a.sun_path) {
            std::fprintf(stderr,
                         "sky worker: listening on unix:PATH needs an absolute path shorter "
                         "than %zu bytes, got '%s'\n",
                         sizeof a.sun_path, path.c_str());
            return;
        }
        std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
        // The directory is the first gate (others cannot even reach the socket); the handshake
        // is the second. Say so when the first is open.
        const std::string dir = path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
        struct stat ds {};
        if (::stat(dir.c_str(), &ds) == 0 && (ds.st_mode & 077) != 0)
            std::fprintf(stderr,
                         "sky worker: warning: %s is accessible to other users (mode %03o); "
                         "the socket relies on the handshake alone\n",
                         dir.c_str(), static_cast<unsigned>(ds.st_mode & 0777));
        // A socket left by an earlier worker in the same (private) directory is replaced;
        // anything else at that path is not ours to remove.
        struct stat st {};
        if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
        fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        // The socket file is created 0600 from the start: no moment where others may connect.
        mode_t old = ::umask(077);
        int rc = fd_ < 0 ? -1 : ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::umask(old);
        if (rc != 0 || ::chmod(path.c_str(), 0600) != 0 || ::listen(fd_, 16) != 0) {
            std::fprintf(stderr, "sky worker: cannot listen on %s: %s\n", where.c_str(),
                         std::strerror(errno));
            if (rc == 0) ::unlink(path.c_str());
            if (fd_ >= 0) ::close(fd_);
            fd_ = -1;
            return;
        }
        unix_path_ = path;
        port_text_ = "unix";
        return;
    }
    auto colon = where.rfind(':');
    std::string host = colon == std::string::npos ? "127.0.0.1" : where.substr(0, colon);
    int port = colon == std::string::npos ? std::atoi(where.c_str())
                                          : std::atoi(where.c_str() + colon + 1);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0) {
        std::fprintf(stderr, "sky worker: cannot listen on %s: %s\n", where.c_str(),
                     std::strerror(errno));
        ::close(fd_);
        fd_ = -1;
        return;
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_text_ = std::to_string(ntohs(a.sin_port));
}

Listener::~Listener() { close(); }

void Listener::close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
    unix_path_.clear();
}

void Listener::write_port_file(const std::string& path) const {
    if (path.empty()) return;
    std::string tmp = path + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "%s\n", port_text_.c_str());
        std::fclose(f);
        std::rename(tmp.c_str(), path.c_str());
    }
}

void Listener::write_port_to(int fd) const {
    const std::string line = port_text_ + "\n";
    std::size_t at = 0;
    while (at < line.size()) {
        const ssize_t n = ::write(fd, line.data() + at, line.size() - at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
    }
    ::close(fd);
}

int Listener::accept_authenticated(std::string_view token,
                                   std::chrono::steady_clock::time_point deadline) {
    if (fd_ < 0) return -1;
    try {
        return worker_authenticate(fd_, -1, token, deadline, std::chrono::seconds(10),
                                   note_to_stderr, allow_from_);
    } catch (const std::exception& e) {
        note_to_stderr(e.what());
        return -1;
    }
}

}  // namespace sky::detail
