#include "ship/file_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace sky::detail::ship {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

bool is_hash(const std::string& h) {
    if (h.size() != 64) return false;
    for (char c : h)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// Reads one request line (bounded in size and time).
bool read_request(int fd, std::string& line) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (line.size() < 256) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
        char c;
        ssize_t n = ::read(fd, &c, 1);
        if (n <= 0) return false;
        if (c == '\n') return true;
        line += c;
    }
    return false;
}

void serve_one(int fd, const std::string& dir, const std::string& token) {
    std::string line;
    if (read_request(fd, line)) {
        auto space = line.find(' ');
        std::string tok = line.substr(0, space);
        std::string hash = space == std::string::npos ? "" : line.substr(space + 1);
        bool ok = tok.size() == token.size() &&
                  CRYPTO_memcmp(tok.data(), token.data(), token.size()) == 0 && is_hash(hash);
        int file = ok ? ::open((dir + "/" + hash).c_str(), O_RDONLY | O_CLOEXEC) : -1;
        struct stat st {};
        if (file >= 0 && ::fstat(file, &st) == 0) {
            off_t off = 0;
            while (off < st.st_size) {
                ssize_t n = ::sendfile(fd, file, &off, static_cast<std::size_t>(st.st_size - off));
                if (n <= 0) break;
            }
        }
        if (file >= 0) ::close(file);
    }
    ::close(fd);
}

}  // namespace

int serve_files_main() {
    const std::string dir = env("SKY_SERVE_DIR");
    const std::string token_file = env("SKY_SERVE_TOKEN_FILE");
    const std::string port_file = env("SKY_SERVE_PORT_FILE");
    const int idle = std::max(5, std::atoi(env("SKY_SERVE_IDLE").c_str()));
    std::string token;
    if (FILE* f = std::fopen(token_file.c_str(), "r")) {
        char buf[256] = {};
        if (std::fgets(buf, sizeof buf, f)) token = buf;
        std::fclose(f);
        ::unlink(token_file.c_str());
    }
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (dir.empty() || token.size() < 32 || port_file.empty()) {
        std::fprintf(stderr,
                     "sky file server: SKY_SERVE_DIR, SKY_SERVE_TOKEN_FILE (a token of "
                     "32 or more characters) and SKY_SERVE_PORT_FILE must be set\n");
        return 2;
    }
    int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(ls, 64) != 0 || ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        std::perror("sky file server: cannot listen");
        return 3;
    }
    {
        std::string tmp = port_file + ".tmp";
        FILE* f = std::fopen(tmp.c_str(), "w");
        if (!f) return 4;
        std::fprintf(f, "%u\n", ntohs(a.sin_port));
        std::fclose(f);
        if (std::rename(tmp.c_str(), port_file.c_str()) != 0) return 4;
    }
    std::atomic<int> active{0};
    for (;;) {
        pollfd p{ls, POLLIN, 0};
        int r = ::poll(&p, 1, idle * 1000);
        if (r == 0 && active.load() == 0) return 0;  // nobody asked for a while: done
        if (r <= 0) continue;
        int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        if (active.load() >= 64) {
            ::close(c);
            continue;
        }
        ++active;
        std::thread([c, &dir, &token, &active] {
            serve_one(c, dir, token);
            --active;
        }).detach();
    }
}

}  // namespace sky::detail::ship
