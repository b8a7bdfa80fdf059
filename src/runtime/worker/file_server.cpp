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
#include <cerrno>
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

// Transfers under way (each on a thread of its own, after its request proved the token).
constexpr int kMaxTransfers = 64;
// Connections that have not sent their request line yet: at most this many in all and from one
// address, each for at most kRequestTime (a receiver sends its line as soon as it connects). A
// newcomer beyond a limit takes the place of the oldest such connection (of its address, or of
// all), so idle connections cannot keep a receiver with the token out.
constexpr std::size_t kMaxPending = 64;
constexpr std::size_t kPendingPerSource = 4;
constexpr auto kRequestTime = std::chrono::seconds(2);
constexpr std::size_t kMaxRequestLine = 256;
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

struct Server {
    std::string dir, token;
    std::set<std::string> files;  // the pool's hashes: nothing else of the store is served
    std::atomic<long long> last_request{0};  // steady-clock seconds of the last authenticated one
    std::atomic<int> serving{0};             // authenticated transfers under way
};

long long now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch())
        .count();
}

// A connection whose request line has not arrived yet.
struct Pending {
    int fd = -1;
    std::string source;  // the peer's address
    Clock::time_point since;
    std::string line;
};

std::string source_of(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    char text[INET6_ADDRSTRLEN] = {};
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
    if (a.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, text, sizeof text);
    else if (a.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, text, sizeof text);
    return text;
}

// Sends one file of the store on `fd`, then closes it (on a thread of its own).
void send_file(int fd, const std::string& hash, Server& s) {
    int file = ::open((s.dir + "/" + hash).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st {};
    if (file >= 0 && ::fstat(file, &st) == 0 && S_ISREG(st.st_mode)) {
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
    }
    if (file >= 0) ::close(file);
    ::close(fd);
    s.last_request = now_seconds();
    --s.serving;
}

// A whole request line: a transfer on its own thread when it holds the token and names one of
// the pool's files, else the connection is closed.
void answer(int fd, const std::string& line, const std::shared_ptr<Server>& s) {
    const auto space = line.find(' ');
    const std::string tok = line.substr(0, space);
    const std::string hash = space == std::string::npos ? "" : line.substr(space + 1);
    const bool authentic = tok.size() == s->token.size() &&
                           CRYPTO_memcmp(tok.data(), s->token.data(), s->token.size()) == 0;
    if (authentic) s->last_request = now_seconds();
    if (!authentic || !is_hash(hash) || s->files.count(hash) == 0 ||
        s->serving.load() >= kMaxTransfers) {
        ::close(fd);
        return;
    }
    ++s->serving;
    std::thread([fd, hash, s] { send_file(fd, hash, *s); }).detach();
}

// Reads what `p` sent so far (non-blocking). True when the connection is done with: its line
// was answered, or it closed, failed or sent too much.
bool read_pending(Pending& p, const std::shared_ptr<Server>& s) {
    char buf[kMaxRequestLine];
    const ssize_t n = ::recv(p.fd, buf, kMaxRequestLine - p.line.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {
        ::close(p.fd);
        return true;
    }
    p.line.append(buf, static_cast<std::size_t>(n));
    if (const auto end = p.line.find('\n'); end != std::string::npos) {
        p.line.resize(end);
        answer(p.fd, p.line, s);
        return true;
    }
    if (p.line.size() >= kMaxRequestLine) {
        ::close(p.fd);
        return true;
    }
    return false;
}

// Makes room for a newcomer from `source`: the oldest waiting connection of that address when
// it has kPendingPerSource, else the oldest of all when there are kMaxPending.
void make_room(std::vector<Pending>& pending, const std::string& source) {
    const auto oldest = [&](auto pred) {
        auto it = pending.end();
        for (auto i = pending.begin(); i != pending.end(); ++i)
            if (pred(*i) && (it == pending.end() || i->since < it->since)) it = i;
        return it;
    };
    const auto mine = static_cast<std::size_t>(std::count_if(
        pending.begin(), pending.end(), [&](const Pending& p) { return p.source == source; }));
    auto drop = pending.end();
    if (mine >= kPendingPerSource)
        drop = oldest([&](const Pending& p) { return p.source == source; });
    else if (pending.size() >= kMaxPending)
        drop = oldest([](const Pending&) { return true; });
    if (drop != pending.end()) {
        ::close(drop->fd);
        pending.erase(drop);
    }
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
    // The request lines are read here, on one thread, from every waiting connection at once;
    // only a request with the token gets a thread (its transfer).
    std::vector<Pending> pending;
    std::vector<pollfd> fds;
    for (;;) {
        const long long now = now_seconds();
        if (now - started >= lifetime) return 0;  // the pool's hard timeout
        struct stat st {};
        if (!run_dir.empty() && ::stat(run_dir.c_str(), &st) != 0) return 0;  // the pool ended
        if (now - s->last_request.load() >= idle && s->serving.load() == 0)
            return 0;  // nobody with the token asked for a while: done
        // Those whose line did not come in time go.
        const auto t = Clock::now();
        std::erase_if(pending, [&](const Pending& p) {
            if (t - p.since < kRequestTime) return false;
            ::close(p.fd);
            return true;
        });
        fds.assign(1, pollfd{ls, POLLIN, 0});
        for (const auto& p : pending) fds.push_back(pollfd{p.fd, POLLIN, 0});
        int wait_ms = 1000;
        for (const auto& p : pending)
            wait_ms =
                std::min<int>(wait_ms, static_cast<int>(std::max<long long>(
                                           1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  p.since + kRequestTime - t)
                                                  .count())));
        if (::poll(fds.data(), fds.size(), wait_ms) <= 0) continue;
        // Lines first (fds[k + 1] is pending[k]), then the newcomer.
        std::vector<Pending> still;
        still.reserve(pending.size());
        for (std::size_t k = 0; k < pending.size(); ++k) {
            if ((fds[k + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
                read_pending(pending[k], s))
                continue;
            still.push_back(std::move(pending[k]));
        }
        pending.swap(still);
        if ((fds[0].revents & POLLIN) == 0) continue;
        int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        Pending p{c, source_of(c), Clock::now(), {}};
        make_room(pending, p.source);
        pending.push_back(std::move(p));
    }
}

}  // namespace sky::detail
