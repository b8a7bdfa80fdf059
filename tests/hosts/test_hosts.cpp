#include "hosts/test_hosts.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace sky::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kSshd = "/usr/sbin/sshd";
constexpr const char* kLockFile = "/run/lock/sky-test-hosts.lock";
// Every name this library creates starts with one of these; the sweep matches on them.
constexpr const char* kNetnsPrefix = "skyn";
constexpr const char* kBridgePrefix = "skyb";
constexpr const char* kVethPrefix = "skyv";
constexpr const char* kPeerPrefix = "skyp";
constexpr const char* kDirPrefix = "sky-test-hosts-";

// Names are "<prefix><pid in base 32>x<counter>...": base 32 digits never contain the 'x'
// separator, so the sweep can read the pid back.
std::string base32(unsigned long v) {
    const char* digits = "0123456789abcdefghijklmnopqrstuv";
    std::string s;
    do {
        s.insert(s.begin(), digits[v % 32]);
        v /= 32;
    } while (v != 0);
    return s;
}

bool find_in_path(const std::string& name, std::string* found) {
    for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
        std::string p = std::string(dir) + "/" + name;
        if (::access(p.c_str(), X_OK) == 0) {
            if (found) *found = p;
            return true;
        }
    }
    return false;
}

std::string ip_tool() {
    std::string p;
    return find_in_path("ip", &p) ? p : "ip";
}

CommandResult ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv{ip_tool()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, std::chrono::seconds(15));
}

void ip_or_throw(const std::vector<std::string>& args) {
    auto r = ip(args);
    if (r.status != 0) {
        std::string cmd = "ip";
        for (const auto& a : args) cmd += " " + a;
        throw std::runtime_error("test hosts: `" + cmd + "` failed: " + r.output);
    }
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const std::filesystem::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("test hosts: cannot write " + p.string());
}

// Parses the pid out of a name "<prefix><pid32>x<...>"; 0 when it does not fit.
long pid_of_name(const std::string& name, std::size_t prefix_len) {
    auto r = name.find('x', prefix_len);
    if (r == std::string::npos || r == prefix_len) return 0;
    long v = 0;
    for (std::size_t i = prefix_len; i < r; ++i) {
        char c = name[i];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'v') ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v * 32 + d;
        if (v > (1L << 31)) return 0;
    }
    return v;
}

bool pid_alive(long pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Pids of every process whose network namespace is the named one (what `ip netns pids` does).
std::vector<pid_t> pids_in_netns(const std::string& netns) {
    std::vector<pid_t> pids;
    struct stat ns {};
    if (::stat(("/run/netns/" + netns).c_str(), &ns) != 0) return pids;
    DIR* d = ::opendir("/proc");
    if (!d) return pids;
    while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != '\0') continue;
        struct stat st {};
        std::string path = std::string("/proc/") + e->d_name + "/ns/net";
        if (::stat(path.c_str(), &st) == 0 && st.st_ino == ns.st_ino && st.st_dev == ns.st_dev) {
            pids.push_back(static_cast<pid_t>(pid));
        }
    }
    ::closedir(d);
    return pids;
}

std::string comm_of(pid_t pid) {
    std::string c = read_file("/proc/" + std::to_string(pid) + "/comm");
    while (!c.empty() && (c.back() == '\n' || c.back() == ' ')) c.pop_back();
    return c;
}

// Kills the processes of a namespace (all, or only sshd) and waits, bounded, until they are gone.
void kill_in_netns(const std::string& netns, bool only_sshd) {
    auto deadline = Clock::now() + milliseconds(5000);
    for (int round = 0; round < 100 && Clock::now() < deadline; ++round) {
        int left = 0;
        for (pid_t pid : pids_in_netns(netns)) {
            if (pid == ::getpid()) continue;
            if (only_sshd && comm_of(pid) != "sshd") continue;
            ++left;
            ::kill(pid, SIGKILL);
        }
        // Killed processes turn zombie; their namespace links vanish, so they stop counting.
        if (left == 0) return;
        std::this_thread::sleep_for(milliseconds(20));
    }
}

class LockFile {
public:
    LockFile() {
        fd_ = ::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) fd_ = ::open("/tmp/sky-test-hosts.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) throw std::runtime_error("test hosts: cannot open the lock file");
        auto deadline = Clock::now() + std::chrono::seconds(60);
        while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            if (Clock::now() > deadline) {
                ::close(fd_);
                throw std::runtime_error("test hosts: lock file held for over 60 s");
            }
            std::this_thread::sleep_for(milliseconds(20));
        }
    }
    ~LockFile() {
        ::flock(fd_, LOCK_UN);
        ::close(fd_);
    }
    LockFile(const LockFile&) = delete;
    LockFile& operator=(const LockFile&) = delete;

private:
    int fd_ = -1;
};

// Removes namespaces, links and directories of runs whose process is gone. Caller holds the lock.
void sweep_leftovers() {
    if (DIR* d = ::opendir("/run/netns")) {
        std::vector<std::string> names;
        while (dirent* e = ::readdir(d)) {
            std::string n = e->d_name;
            if (n.rfind(kNetnsPrefix, 0) == 0) names.push_back(n);
        }
        ::closedir(d);
        for (const auto& n : names) {
            long pid = pid_of_name(n, 4);
            if (pid == 0 || pid_alive(pid)) continue;
            kill_in_netns(n, false);
            ip({"netns", "del", n});
        }
    }
    auto links = ip({"-o", "link", "show"});
    std::istringstream lines(links.output);
    std::string line;
    while (std::getline(lines, line)) {
        // "12: skyb3f2x1: <...>" or "13: skyv3f2x1h0@if12: <...>"
        auto c1 = line.find(": ");
        if (c1 == std::string::npos) continue;
        auto rest = line.substr(c1 + 2);
        auto end = rest.find_first_of(":@");
        std::string name = rest.substr(0, end);
        bool ours = name.rfind(kBridgePrefix, 0) == 0 || name.rfind(kVethPrefix, 0) == 0 ||
                    name.rfind(kPeerPrefix, 0) == 0;
        if (!ours) continue;
        long pid = pid_of_name(name, 4);
        if (pid == 0 || pid_alive(pid)) continue;
        ip({"link", "del", name});
    }
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
        std::string n = e.path().filename().string();
        if (n.rfind(kDirPrefix, 0) != 0) continue;
        long pid = pid_of_name(n, std::strlen(kDirPrefix));
        if (pid == 0 || pid_alive(pid)) continue;
        std::filesystem::remove_all(e.path(), ec);
    }
}

bool tcp_banner(const std::string& address, std::uint16_t port, milliseconds timeout) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
    bool ok = false;
    auto deadline = Clock::now() + timeout;
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (rc == 0 || errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int left = static_cast<int>(
            std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
        if (::poll(&p, 1, std::max(left, 1)) == 1) {
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == 0) {
                p = {fd, POLLIN, 0};
                left = static_cast<int>(
                    std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
                char buf[8] = {};
                if (::poll(&p, 1, std::max(left, 1)) == 1 && ::recv(fd, buf, 4, 0) == 4) {
                    ok = std::string(buf, 4) == "SSH-";
                }
            }
        }
    }
    ::close(fd);
    return ok;
}

std::atomic<unsigned> g_run_counter{0};

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    CommandResult result;
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) return result;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(pipefd[1]);
    if (rc != 0) {
        ::close(pipefd[0]);
        result.output = "cannot start " + argv[0] + ": " + std::strerror(rc);
        return result;
    }
    auto deadline = Clock::now() + timeout;
    char buf[4096];
    for (;;) {
        auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            result.timed_out = true;
            ::kill(pid, SIGKILL);
            break;
        }
        pollfd p{pipefd[0], POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
        ssize_t n = ::read(pipefd[0], buf, sizeof buf);
        if (n <= 0) break;
        result.output.append(buf, static_cast<std::size_t>(n));
    }
    ::close(pipefd[0]);
    int status = 0;
    // The child closed its output; its exit follows promptly, but stay bounded anyway.
    for (int i = 0; i < 500; ++i) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            return result;
        }
        if (w < 0) return result;
        if (i == 250) ::kill(pid, SIGKILL);
        std::this_thread::sleep_for(milliseconds(10));
    }
    return result;
}

bool TestHosts::available(std::string* why) {
    auto fail = [&](std::string m) {
        if (why) *why = std::move(m);
        return false;
    };
    if (::geteuid() != 0) return fail("test hosts need root (network namespaces, sshd)");
    if (!find_in_path("ip", nullptr)) return fail("test hosts need `ip` (iproute2)");
    if (::access(kSshd, X_OK) != 0) return fail("test hosts need /usr/sbin/sshd (openssh-server)");
    if (!find_in_path("ssh-keygen", nullptr)) return fail("test hosts need ssh-keygen");
    return true;
}

TestHosts::TestHosts(int n, TestHostOptions options) : options_(options) {
    std::string why;
    if (!available(&why)) throw std::runtime_error(why);
    if (n < 1 || n > 64) throw std::runtime_error("test hosts: between 1 and 64 hosts");
    unsigned counter = g_run_counter.fetch_add(1) % (32 * 32);
    tag_ = base32(static_cast<unsigned long>(::getpid())) + "x" + base32(counter);
    bridge_ = kBridgePrefix + tag_;
    try {
        setup(n);
    } catch (...) {
        teardown();
        throw;
    }
}

TestHosts::~TestHosts() { teardown(); }

// The reaper's script. It blocks reading fd 3, the read end of a pipe whose only write end the
// test process holds (close-on-exec, so nothing it starts inherits it). "done" (teardown
// finished) ends it; end of file means the test process died: then it kills every process in
// the hosts' namespaces, deletes them, the links and the bridge, and the run's directory.
// Arguments: ip, the bridge, the directory's prefix, then the namespaces and links.
constexpr const char* kReaperScript = R"sh(set -u
ip=$1; bridge=$2; dirprefix=$3; shift 3
line=
read -r line <&3 || true
exec 3<&-
[ "$line" = done ] && exit 0
for ns in "$@"; do
  case $ns in skyn*) ;; *) continue ;; esac
  round=0
  while [ $round -lt 25 ]; do
    pids=$("$ip" netns pids "$ns" 2>/dev/null) || break
    [ -z "$pids" ] && break
    kill -9 $pids 2>/dev/null
    sleep 0.2
    round=$((round + 1))
  done
  "$ip" netns del "$ns" 2>/dev/null
done
for l in "$@"; do
  case $l in skyv*) "$ip" link del "$l" 2>/dev/null ;; esac
done
"$ip" link del "$bridge" 2>/dev/null
rm -rf -- "$dirprefix"* 2>/dev/null
if [ -n "${SKY_TEST_REAPER_LOG:-}" ]; then echo "reaped $bridge" >> "$SKY_TEST_REAPER_LOG"; fi
exit 0
)sh";

void TestHosts::start_reaper(int n) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("test hosts: pipe failed");
    std::vector<std::string> argv = {
        "/bin/sh",
        "-c",
        kReaperScript,
        "sky-test-hosts-reaper",
        ip_tool(),
        bridge_,
        (std::filesystem::temp_directory_path() / (std::string(kDirPrefix) + tag_ + "-")).string()};
    for (int i = 0; i < n; ++i) {
        const std::string suffix = "h" + base32(static_cast<unsigned long>(i));
        argv.push_back(kNetnsPrefix + tag_ + suffix);
        argv.push_back(kVethPrefix + tag_ + suffix);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[0], 3);  // dup2 clears close-on-exec
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A session of its own: a signal to the test's process group (a CI time limit, Ctrl-C)
    // does not reach it; default dispositions and an empty mask whatever the test set.
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, "/bin/sh", &fa, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(fds[0]);
    if (rc != 0) {
        ::close(fds[1]);
        throw std::runtime_error(std::string("test hosts: cannot start the reaper: ") +
                                 std::strerror(rc));
    }
    reaper_pid_ = pid;
    reaper_fd_ = fds[1];
}

void TestHosts::stop_reaper() noexcept {
    if (reaper_fd_ >= 0) {
        const char done[] = "done\n";
        (void)!::write(reaper_fd_, done, sizeof done - 1);
        ::close(reaper_fd_);
        reaper_fd_ = -1;
    }
    if (reaper_pid_ > 0) {
        // It exits at once on "done"; bounded anyway (init reaps it if it ever lingers).
        for (int i = 0; i < 500; ++i) {
            if (::waitpid(reaper_pid_, nullptr, WNOHANG) != 0) break;
            std::this_thread::sleep_for(milliseconds(10));
        }
        reaper_pid_ = -1;
    }
}

void TestHosts::setup(int n) {
    // Before anything exists: from here on a killed test process leaves nothing behind.
    start_reaper(n);
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (kDirPrefix + tag_ + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("test hosts: mkdtemp failed");
    dir_ = tmpl;
    ::mkdir("/run/sshd", 0755);  // sshd's privilege separation directory

    auto keygen = [&](const std::filesystem::path& file, const std::string& comment) {
        auto r = run_command(
            {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", file.string()});
        if (r.status != 0) throw std::runtime_error("test hosts: ssh-keygen failed: " + r.output);
    };
    keygen(client_key_path(), "sky-test-client");
    std::filesystem::copy_file(dir_ / "client_ed25519.pub", dir_ / "authorized_keys");

    {
        LockFile lock;
        sweep_leftovers();
        // A /24 of 10.200.0.0/12 no other run (or anything else) uses, chosen under the lock.
        auto addrs = ip({"-o", "-4", "addr", "show"}).output;
        unsigned start = static_cast<unsigned>(::getpid()) * 7 + g_run_counter.load();
        for (unsigned k = 0; k < 4096; ++k) {
            unsigned idx = (start + k) % 4096;
            std::string s =
                "10." + std::to_string(200 + idx / 256) + "." + std::to_string(idx % 256) + ".";
            if (addrs.find(" " + s) == std::string::npos) {
                subnet_ = s;
                break;
            }
        }
        if (subnet_.empty()) throw std::runtime_error("test hosts: no free test subnet");
        ip_or_throw({"link", "add", "name", bridge_, "type", "bridge", "forward_delay", "0"});
        ip_or_throw({"addr", "add", subnet_ + "1/24", "dev", bridge_});
        ip_or_throw({"link", "set", bridge_, "up"});
    }

    hosts_.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        Host& h = hosts_[static_cast<std::size_t>(i)];
        std::string suffix = "h" + base32(static_cast<unsigned long>(i));
        h.netns = kNetnsPrefix + tag_ + suffix;
        h.veth = kVethPrefix + tag_ + suffix;
        std::string peer = kPeerPrefix + tag_ + suffix;
        h.address = subnet_ + std::to_string(10 + i);
        ip_or_throw({"netns", "add", h.netns});
        ip_or_throw({"link", "add", h.veth, "type", "veth", "peer", "name", peer});
        ip_or_throw({"link", "set", peer, "netns", h.netns});
        ip_or_throw({"-n", h.netns, "link", "set", peer, "name", "eth0"});
        ip_or_throw({"-n", h.netns, "addr", "add", h.address + "/24", "dev", "eth0"});
        ip_or_throw({"-n", h.netns, "link", "set", "eth0", "up"});
        ip_or_throw({"-n", h.netns, "link", "set", "lo", "up"});
        ip_or_throw({"link", "set", h.veth, "master", bridge_});
        ip_or_throw({"link", "set", h.veth, "up"});

        auto key = dir_ / ("host" + std::to_string(i) + "_ed25519");
        keygen(key, "sky-test-host-" + std::to_string(i));
        h.public_key = read_file(key.string() + ".pub");
        while (!h.public_key.empty() && h.public_key.back() == '\n') h.public_key.pop_back();
        auto fp = run_command({"ssh-keygen", "-l", "-E", "sha256", "-f", key.string() + ".pub"});
        std::istringstream fs(fp.output);
        std::string bits;
        fs >> bits >> h.fingerprint;
        if (fp.status != 0 || h.fingerprint.rfind("SHA256:", 0) != 0) {
            throw std::runtime_error("test hosts: ssh-keygen -l failed: " + fp.output);
        }
        h.log = dir_ / ("sshd" + std::to_string(i) + ".log");
        make_host_root(i);
        write_sshd_config(h, i, key, dir_ / "authorized_keys");
        start_sshd(h, i);
    }
    for (auto& h : hosts_) wait_listening(h, std::chrono::seconds(15));
    std::string known;
    for (int i = 0; i < n; ++i) known += known_hosts_line(i) + "\n";
    write_file(known_hosts_file(), known);
}

std::filesystem::path TestHosts::host_root(int i) const {
    return dir_ / ("host" + std::to_string(i));
}

std::filesystem::path TestHosts::host_path(int i, const std::filesystem::path& path) const {
    const auto rel = path.lexically_relative("/");
    const auto first = *rel.begin();
    if (first == "root" || first == "tmp" || first == "home") return host_root(i) / rel;
    throw std::runtime_error("test hosts: " + path.string() +
                             " is not in a host's private part (/root, /tmp, /home)");
}

void TestHosts::make_host_root(int i) {
    // What a host has of its own: /root, /tmp, /home, and /etc/ssh (its sshd's files).
    auto r = host_root(i);
    for (const char* d : {"root", "root/.ssh", "tmp", "home", "etc-ssh"})
        std::filesystem::create_directories(r / d);
    std::filesystem::permissions(r / "root", std::filesystem::perms::owner_all);
    std::filesystem::permissions(r / "root/.ssh", std::filesystem::perms::owner_all);
    ::chmod((r / "tmp").c_str(), 01777);
}

void TestHosts::write_sshd_config(Host& h, int i, const std::filesystem::path& host_key,
                                  const std::filesystem::path& authorized_keys) {
    // The host sees these at /etc/ssh and /root/.ssh, as a real machine has them.
    auto etc = host_root(i) / "etc-ssh";
    std::error_code ec;
    std::filesystem::copy_file(host_key, etc / "ssh_host_ed25519_key",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw std::runtime_error("test hosts: cannot copy the host key: " + ec.message());
    ::chmod((etc / "ssh_host_ed25519_key").c_str(), 0600);
    std::filesystem::copy_file(authorized_keys, host_root(i) / "root/.ssh/authorized_keys",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw std::runtime_error("test hosts: cannot copy authorized keys: " + ec.message());
    h.config = etc / "sshd_config";
    write_file(h.config, "ListenAddress " + h.address +
                             ":22\n"
                             "HostKey /etc/ssh/ssh_host_ed25519_key\n"
                             "PidFile none\n"
                             "AuthorizedKeysFile /root/.ssh/authorized_keys\n"
                             "PermitRootLogin prohibit-password\n"
                             "PubkeyAuthentication yes\n"
                             "PasswordAuthentication no\n"
                             "KbdInteractiveAuthentication no\n"
                             "UsePAM no\n"
                             "StrictModes no\n"
                             "AllowTcpForwarding yes\n"
                             "AllowStreamLocalForwarding yes\n"
                             "X11Forwarding no\n"
                             "PrintMotd no\n"
                             "UseDNS no\n"
                             "MaxSessions 64\n"
                             "MaxStartups 64:30:128\n"
                             "LogLevel VERBOSE\n" +
                             std::string(options_.sftp ? "Subsystem sftp internal-sftp\n" : ""));
}

void TestHosts::start_sshd(Host& h, int i, bool die_with_parent) {
    int nsfd = ::open(("/run/netns/" + h.netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) throw std::runtime_error("test hosts: cannot open netns " + h.netns);
    int logfd = ::open(h.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        ::close(nsfd);
        throw std::runtime_error("test hosts: cannot open " + h.log.string());
    }
    // Inside the host, /etc/ssh holds its sshd's files.
    std::string cfg = "/etc/ssh/sshd_config";
    const char* argv[] = {kSshd, "-D", "-e", "-f", cfg.c_str(), nullptr};
    // Each host has its own /root, /tmp, /home and /etc/ssh, and sees neither this project's
    // sources nor its build tree (a private mount namespace), as a real machine: a file the
    // client forgot to send is missing there, and a test that depends on one fails.
    const auto root = host_root(i);
    const std::string home = (root / "root").string(), tmp = (root / "tmp").string(),
                      homes = (root / "home").string(), etc = (root / "etc-ssh").string();
    std::vector<std::string> hidden;
    for (const char* d : {SKY_TEST_SOURCE_DIR, SKY_TEST_BINARY_DIR})
        if (*d) hidden.emplace_back(d);
    const char* hide[3] = {hidden.size() > 0 ? hidden[0].c_str() : nullptr,
                           hidden.size() > 1 ? hidden[1].c_str() : nullptr, nullptr};
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
        // Only async-signal-safe calls between fork and exec.
        // The listener dies with the test process. Not when started from a short-lived thread
        // (restart_sshd from a server's request thread): the death signal follows the thread;
        // teardown, or the next run's sweep, ends those.
        if (die_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        if (::setns(nsfd, CLONE_NEWNET) != 0) ::_exit(126);
        if (::unshare(CLONE_NEWNS) != 0) ::_exit(125);
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(124);
        // The build tree first: it may lie under /tmp, hidden next anyway.
        for (const char** d = hide; *d; ++d)
            ::mount("tmpfs", *d, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=755");
        if (::mount(etc.c_str(), "/etc/ssh", nullptr, MS_BIND, nullptr) != 0) ::_exit(122);
        if (::mount(home.c_str(), "/root", nullptr, MS_BIND, nullptr) != 0) ::_exit(123);
        if (::mount(tmp.c_str(), "/tmp", nullptr, MS_BIND, nullptr) != 0) ::_exit(121);
        ::mount(homes.c_str(), "/home", nullptr, MS_BIND, nullptr);  // where there is a /home
        ::mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
        ::dup2(logfd, 1);
        ::dup2(logfd, 2);
        ::execv(kSshd, const_cast<char* const*>(argv));
        ::_exit(127);
    }
    ::close(nsfd);
    ::close(logfd);
    if (pid < 0) throw std::runtime_error("test hosts: fork failed");
    h.sshd_pid = pid;
}

void TestHosts::wait_listening(Host& h, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (int attempt = 0; attempt < 1000 && Clock::now() < deadline; ++attempt) {
        int status = 0;
        if (h.sshd_pid > 0 && ::waitpid(h.sshd_pid, &status, WNOHANG) == h.sshd_pid) {
            h.sshd_pid = -1;
            throw std::runtime_error(
                "test hosts: sshd in " + h.netns + " exited at start (status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status)) +
                "): " + read_file(h.log));
        }
        if (tcp_banner(h.address, 22, milliseconds(1000))) return;
        std::this_thread::sleep_for(milliseconds(20));
    }
    throw std::runtime_error("test hosts: sshd on " + h.address + " not reachable within " +
                             std::to_string(timeout.count()) + " ms: " + read_file(h.log));
}

void TestHosts::teardown() noexcept {
    try {
        for (auto& h : hosts_) {
            if (h.netns.empty()) continue;
            kill_in_netns(h.netns, false);
            if (h.sshd_pid > 0) {
                ::kill(h.sshd_pid, SIGKILL);
                ::waitpid(h.sshd_pid, nullptr, 0);
                h.sshd_pid = -1;
            }
            ip({"netns", "del", h.netns});
        }
        for (auto& h : hosts_) {
            // Normally gone with its peer's namespace; make sure.
            if (!h.veth.empty() && ip({"link", "show", h.veth}).status == 0) {
                ip({"link", "del", h.veth});
            }
        }
        if (!bridge_.empty() && !subnet_.empty()) ip({"link", "del", bridge_});
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
        }
    } catch (...) {
        // Teardown runs in destructors: best effort, never throw; the next run's sweep finishes.
    }
    hosts_.clear();
    stop_reaper();
}

const std::string& TestHosts::address(int i) const {
    return hosts_.at(static_cast<std::size_t>(i)).address;
}
std::uint16_t TestHosts::port(int) const { return 22; }
const std::string& TestHosts::host_key_fingerprint(int i) const {
    return hosts_.at(static_cast<std::size_t>(i)).fingerprint;
}
const std::string& TestHosts::host_public_key(int i) const {
    return hosts_.at(static_cast<std::size_t>(i)).public_key;
}
std::string TestHosts::known_hosts_line(int i) const {
    return address(i) + " " + host_public_key(i);
}
std::filesystem::path TestHosts::known_hosts_file() const { return dir_ / "known_hosts"; }
std::filesystem::path TestHosts::client_key_path() const { return dir_ / "client_ed25519"; }
const std::string& TestHosts::netns(int i) const {
    return hosts_.at(static_cast<std::size_t>(i)).netns;
}
std::string TestHosts::unused_address() const { return subnet_ + "250"; }

void TestHosts::kill_sshd(int i) {
    Host& h = hosts_.at(static_cast<std::size_t>(i));
    kill_in_netns(h.netns, true);
    if (h.sshd_pid > 0) {
        ::kill(h.sshd_pid, SIGKILL);
        ::waitpid(h.sshd_pid, nullptr, 0);
        h.sshd_pid = -1;
    }
}

void TestHosts::kill_all_processes(int i) {
    Host& h = hosts_.at(static_cast<std::size_t>(i));
    kill_in_netns(h.netns, false);
    if (h.sshd_pid > 0) {
        ::waitpid(h.sshd_pid, nullptr, 0);
        h.sshd_pid = -1;
    }
}

void TestHosts::restart_sshd(int i, const std::string& host_private_key,
                             const std::string& authorized_keys) {
    Host& h = hosts_.at(static_cast<std::size_t>(i));
    kill_all_processes(i);
    const std::string n = std::to_string(i);
    auto key = dir_ / ("host" + n + "_assigned_ed25519");
    auto auth = dir_ / ("authorized_keys" + n);
    std::string priv = host_private_key;
    if (!priv.empty() && priv.back() != '\n') priv += '\n';
    {
        std::error_code ec;
        std::filesystem::remove(key, ec);
        int fd = ::open(key.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) throw std::runtime_error("test hosts: cannot write " + key.string());
        ::close(fd);
    }
    write_file(key, priv);
    write_file(auth, authorized_keys.empty() || authorized_keys.back() == '\n'
                         ? authorized_keys
                         : authorized_keys + "\n");
    auto pub = run_command({"ssh-keygen", "-y", "-f", key.string()});
    if (pub.status != 0) throw std::runtime_error("test hosts: not an OpenSSH private key");
    h.public_key = pub.output;
    while (!h.public_key.empty() && h.public_key.back() == '\n') h.public_key.pop_back();
    write_file(key.string() + ".pub", h.public_key + "\n");
    auto fp = run_command({"ssh-keygen", "-l", "-E", "sha256", "-f", key.string() + ".pub"});
    std::istringstream fs(fp.output);
    std::string bits;
    fs >> bits >> h.fingerprint;
    write_sshd_config(h, i, key, auth);
    start_sshd(h, i, false);
    wait_listening(h, std::chrono::seconds(15));
}

void TestHosts::enter_netns(int i) const {
    const auto& ns = netns(i);
    int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("test hosts: cannot open netns " + ns);
    int rc = ::setns(fd, CLONE_NEWNET);
    ::close(fd);
    if (rc != 0) throw std::runtime_error("test hosts: setns " + ns + ": " + std::strerror(errno));
}

void TestHosts::set_link_up(int i, bool up) {
    ip_or_throw({"link", "set", hosts_.at(static_cast<std::size_t>(i)).veth, up ? "up" : "down"});
}

std::vector<std::string> TestHosts::ssh_command(int i, const std::string& command) const {
    return {"ssh",
            "-i",
            client_key_path().string(),
            "-o",
            "UserKnownHostsFile=" + known_hosts_file().string(),
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-p",
            std::to_string(port(i)),
            "root@" + address(i),
            command};
}

std::string TestHosts::sshd_log(int i) const {
    return read_file(hosts_.at(static_cast<std::size_t>(i)).log);
}

int remote_workers() {
    // Only workers in this process's hosts count: other test processes (ctest -j) run hosts
    // and workers of their own at the same time.
    std::set<ino_t> ours;
    const std::string prefix = kNetnsPrefix + base32(static_cast<unsigned long>(::getpid())) + "x";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
        struct stat st {};
        if (e.path().filename().string().rfind(prefix, 0) == 0 &&
            ::stat(e.path().c_str(), &st) == 0)
            ours.insert(st.st_ino);
    }
    auto r = run_command({"pgrep", "-f", "^/[^ ]*/\\.sky/prog/[^ ]* --sky-worker"});
    int n = 0;
    std::istringstream is(r.output);
    for (std::string l; std::getline(is, l);) {
        if (l.empty()) continue;
        struct stat st {};
        if (::stat(("/proc/" + l + "/ns/net").c_str(), &st) == 0 && ours.count(st.st_ino)) ++n;
    }
    return n;
}

bool wait_until(const std::function<bool()>& ok, std::chrono::seconds limit) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (ok()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ok();
}

}  // namespace sky::test
