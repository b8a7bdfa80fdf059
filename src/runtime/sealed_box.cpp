#include "runtime/sealed_box.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/sealed.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

namespace {

constexpr std::size_t len_size = 8;

io::SealKey box_key(const AuthBlock& shared, const AuthBlock& sender, const AuthBlock& recipient) {
    std::vector<std::byte> info(sender.begin(), sender.end());
    info.insert(info.end(), recipient.begin(), recipient.end());
    return hkdf_sha256("sky box v1", shared, info);
}

// Wipes a key when it leaves scope.
struct Wiped {
    AuthBlock& b;
    ~Wiped() { OPENSSL_cleanse(b.data(), b.size()); }
};

bool write_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

int refuse(const std::string& why) {
    std::fprintf(stderr, "sky unbox: %s\n", why.c_str());
    return 1;
}

}  // namespace

std::string seal_box(const AuthBlock& recipient, std::string_view plain) {
    const X25519Key e;
    const AuthBlock sender = e.public_key();
    AuthBlock shared = e.agree(recipient);
    AuthBlock key = box_key(shared, sender, recipient);
    Wiped w1{shared}, w2{key};
    std::vector<std::byte> body(len_size + plain.size());
    std::uint64_t n = plain.size();
    for (std::size_t i = 0; i < len_size; ++i) body[i] = static_cast<std::byte>(n >> (8 * i));
    std::memcpy(body.data() + len_size, plain.data(), plain.size());
    std::vector<std::byte> sealed;
    io::RecordSealer(key).seal(body, sealed);
    OPENSSL_cleanse(body.data(), body.size());
    std::string out(reinterpret_cast<const char*>(sender.data()), sender.size());
    out.append(reinterpret_cast<const char*>(sealed.data()), sealed.size());
    return out;
}

std::string open_box(const X25519Key& mine, std::string_view box) {
    AuthBlock sender{};
    if (box.size() < sender.size() + io::seal_overhead)
        throw ProtocolError("a sealed box of " + std::to_string(box.size()) +
                            " bytes is shorter than its key and one record");
    std::memcpy(sender.data(), box.data(), sender.size());
    AuthBlock shared = mine.agree(sender);
    AuthBlock key = box_key(shared, sender, mine.public_key());
    Wiped w1{shared}, w2{key};
    io::RecordOpener opener(key);
    opener.feed(std::as_bytes(std::span(box.data() + sender.size(), box.size() - sender.size())));
    std::vector<std::byte> body;
    try {
        opener.open(body);
    } catch (...) {
        OPENSSL_cleanse(body.data(), body.size());
        throw;
    }
    if (opener.partial() != 0) {
        OPENSSL_cleanse(body.data(), body.size());
        throw ProtocolError("a sealed box is cut off inside a record");
    }
    std::uint64_t n = 0;
    if (body.size() >= len_size)
        for (std::size_t i = 0; i < len_size; ++i)
            n |= std::to_integer<std::uint64_t>(body[i]) << (8 * i);
    if (body.size() < len_size || n != body.size() - len_size) {
        OPENSSL_cleanse(body.data(), body.size());
        throw ProtocolError("a sealed box has records missing (it holds " +
                            std::to_string(body.size()) + " bytes of its " +
                            std::to_string(n + len_size) + ")");
    }
    std::string out(reinterpret_cast<const char*>(body.data()) + len_size, n);
    OPENSSL_cleanse(body.data(), body.size());
    return out;
}

int box_key_main(const std::vector<std::string>& args) {
    if (!args.empty()) return refuse("box-key takes no arguments");
    ::umask(077);
    std::string dir;
    for (int i = 0; i < 8 && dir.empty(); ++i) {
        std::string d = "/tmp/sky-box-" + random_hex(24);
        if (::mkdir(d.c_str(), 0700) == 0)
            dir = d;
        else if (errno != EEXIST)
            return refuse("cannot make a private directory in /tmp: " +
                          std::string(std::strerror(errno)));
    }
    if (dir.empty()) return refuse("cannot make a private directory in /tmp");
    try {
        const X25519Key k;
        AuthBlock priv = k.private_key();
        Wiped w{priv};
        const std::string path = dir + "/key";
        const int fd =
            ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        const bool ok =
            fd >= 0 && write_all(fd, reinterpret_cast<const char*>(priv.data()), priv.size());
        if (fd >= 0) ::close(fd);
        if (!ok) {
            ::unlink(path.c_str());
            ::rmdir(dir.c_str());
            return refuse("cannot write the key: " + std::string(std::strerror(errno)));
        }
        std::printf("sky-box %s %s\n", dir.c_str(), public_key_text(k.public_key()).c_str());
        return std::fflush(stdout) == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        ::rmdir(dir.c_str());
        return refuse(e.what());
    }
}

int unbox_main(const std::vector<std::string>& args) {
    if (args.size() != 3) return refuse("usage: unbox DIR NAME MODE");
    const std::string& dir = args[0];
    const std::string& name = args[1];
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        return refuse("'" + name.substr(0, 80) + "' is not a file name");
    char* end = nullptr;
    const long mode = std::strtol(args[2].c_str(), &end, 8);
    if (args[2].empty() || *end != '\0' || mode < 0 || mode > 0777)
        return refuse("'" + args[2].substr(0, 20) + "' is not an octal mode");
    // The directory box-key made: this user's, 0700, reached without following a link.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    if (dfd < 0 || ::fstat(dfd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 07777) != 0700) {
        if (dfd >= 0) ::close(dfd);
        return refuse(dir + " is not this user's private (0700) directory");
    }
    AuthBlock priv{};
    Wiped w{priv};
    const int kfd = ::openat(dfd, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat ks {};
    const bool key_ok = kfd >= 0 && ::fstat(kfd, &ks) == 0 && S_ISREG(ks.st_mode) &&
                        ks.st_uid == ::geteuid() && (ks.st_mode & 077) == 0 &&
                        ::read(kfd, priv.data(), priv.size()) == static_cast<ssize_t>(priv.size());
    if (kfd >= 0) ::close(kfd);
    ::unlinkat(dfd, "key", 0);  // used once, whatever happens next
    if (!key_ok) {
        ::close(dfd);
        return refuse("no key of this user's in " + dir);
    }
    std::string box;
    char buf[1 << 16];
    for (;;) {
        const ssize_t r = ::read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            ::close(dfd);
            return refuse("cannot read the box: " + std::string(std::strerror(errno)));
        }
        if (r == 0) break;
        box.append(buf, static_cast<std::size_t>(r));
        if (box.size() > box_max_content +
                             (box_max_content / io::seal_max_record + 2) * io::seal_overhead + 64) {
            ::close(dfd);
            return refuse("the box is larger than " + std::to_string(box_max_content >> 20) +
                          " MiB");
        }
    }
    std::string content;
    try {
        const X25519Key mine(priv);
        content = open_box(mine, box);
    } catch (const std::exception& e) {
        ::close(dfd);
        return refuse(e.what());
    }
    const int fd =
        ::openat(dfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    const bool ok = fd >= 0 && write_all(fd, content.data(), content.size()) &&
                    ::fchmod(fd, static_cast<mode_t>(mode)) == 0;
    const int saved = errno;
    if (fd >= 0) ::close(fd);
    OPENSSL_cleanse(content.data(), content.size());
    if (!ok) {
        ::unlinkat(dfd, name.c_str(), 0);
        ::close(dfd);
        return refuse("cannot write " + dir + "/" + name + ": " + std::strerror(saved));
    }
    ::close(dfd);
    return 0;
}

}  // namespace sky::detail
