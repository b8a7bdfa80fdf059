#include "runtime/worker/file_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "util/env.hpp"

namespace sky::detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxConnections = 64;
constexpr auto kRequestTime = std::chrono::seconds(5);
constexpr int kSendStallSeconds = 30;
constexpr auto kTransferTime = std::chrono::minutes(20);

bool is_hash(const std::string& h) {
    if (h.size() != 64) return false;
    for (char c : h)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// The lines of a private file the client wrote for this server; the file is removed once read.
std::vector<std::string> take_lines(const std::string& path, std::size_t max_lines) {
    std::vector<std::string> out;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
        char buf[256];
        while (out.size() < max_lines && std::fgets(buf, sizeof buf, f)) {
            std::string l = buf;
            while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
            out.push_back(std::move(l));
        }
        std::fclose(f);
        ::unlink(path.c_str());
    }
    return out;
}

// Reads one request line (bounded in size and time).
bool read_request(int fd, std::string& line) {
    auto deadline = Clock::now() + kRequestTime;
    while (line.size() < 256) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
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

struct Server {
    std::string dir, token;
    std::set<std::string> files;  // the pool's hashes: nothing else of the store is served
    std::atomic<int> active{0};
    std::atomic<long long> last_request{0};  // steady-clock seconds of the last authenticated one
    std::atomic<int> serving{0};             // authenticated transfers under way
};

long long now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch())
        .count();
}

void serve_one(int fd, Server& s) {
    std::string line;
    if (read_request(fd, line)) {
        auto space = line.find(' ');
        std::string tok = line.substr(0, space);
        std::string hash = space == std::string::npos ? "" : line.substr(space + 1);
        const bool authentic = tok.size() == s.token.size() &&
                               CRYPTO_memcmp(tok.data(), s.token.data(), s.token.size()) == 0;
        if (authentic) s.last_request = now_seconds();
        const bool ok = authentic && is_hash(hash) && s.files.count(hash) > 0;
        int file =
            ok ? ::open((s.dir + "/" + hash).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
        struct stat st {};
        if (file >= 0 && ::fstat(file, &st) == 0 && S_ISREG(st.st_mode)) {
            ++s.serving;
            // A reader that stops reading is dropped after kSendStallSeconds (SO_SNDTIMEO makes
            // sendfile return), and no transfer holds a slot longer than kTransferTime.
            timeval tv{kSendStallSeconds, 0};
            ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            const auto until = Clock::now() + kTransferTime;
            off_t off = 0;
            while (off < st.st_size && Clock::now() < until) {
                ssize_t n = ::sendfile(fd, file, &off, static_cast<std::size_t>(st.st_size - off));
                if (n <= 0) break;
            }
            --s.serving;
            s.last_request = now_seconds();
        }
        if (file >= 0) ::close(file);
    }
    ::close(fd);
}

// The address to listen on: an IPv4 literal or a name resolved here; empty: every address.
bool listen_address(const std::string& name, in_addr& out) {
    if (name.empty()) {
        out.s_addr = htonl(INADDR_ANY);
        return true;
    }
    if (::inet_pton(AF_INET, name.c_str(), &out) == 1) return true;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
    out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
    return true;
}

}  // namespace

int serve_files_main() {
    auto s = std::make_shared<Server>();
    s->dir = env_or("SKY_SERVE_DIR");
    const std::string token_file = env_or("SKY_SERVE_TOKEN_FILE");
    const std::string list_file = env_or("SKY_SERVE_LIST_FILE");
    const std::string port_file = env_or("SKY_SERVE_PORT_FILE");
    const std::string run_dir = env_or("SKY_SERVE_RUN_DIR");
    const std::string address = env_or("SKY_SERVE_ADDR");
    const int idle = std::max(5, std::atoi(env_or("SKY_SERVE_IDLE").c_str()));
    const long long lifetime = std::atoll(env_or("SKY_SERVE_LIFETIME").c_str());
    auto token_lines = take_lines(token_file, 1);
    if (!token_lines.empty()) s->token = token_lines.front();
    for (auto& h : take_lines(list_file, 1u << 20))
        if (is_hash(h)) s->files.insert(h);
    if (s->dir.empty() || s->token.size() < 32 || port_file.empty() || list_file.empty() ||
        lifetime <= 0) {
        std::fprintf(stderr,
                     "sky file server: SKY_SERVE_DIR, SKY_SERVE_TOKEN_FILE (a token of 32 or more "
                     "characters), SKY_SERVE_LIST_FILE, SKY_SERVE_PORT_FILE and "
                     "SKY_SERVE_LIFETIME must be set\n");
        return 2;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (!listen_address(address, a.sin_addr)) {
        std::fprintf(stderr, "sky file server: cannot resolve the address to listen on\n");
        return 3;
    }
    int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (ls >= 0) ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
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
    const long long started = now_seconds();
    s->last_request = started;
    for (;;) {
        const long long now = now_seconds();
        if (now - started >= lifetime) return 0;  // the pool's hard timeout
        struct stat st {};
        if (!run_dir.empty() && ::stat(run_dir.c_str(), &st) != 0) return 0;  // the pool ended
        if (now - s->last_request.load() >= idle && s->serving.load() == 0)
            return 0;  // nobody with the token asked for a while: done
        pollfd p{ls, POLLIN, 0};
        if (::poll(&p, 1, 1000) <= 0) continue;
        int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        if (s->active.load() >= kMaxConnections) {
            ::close(c);
            continue;
        }
        ++s->active;
        std::thread([c, s] {
            serve_one(c, *s);
            --s->active;
        }).detach();
    }
}

}  // namespace sky::detail
