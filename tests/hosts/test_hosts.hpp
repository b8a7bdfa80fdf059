#pragma once
// Test hosts: N network namespaces on a private bridge, each running a real OpenSSH sshd with a
// per-run ed25519 host key, reachable from this (the root) namespace. Each sshd also has its own
// mount namespace with its own /root, /tmp, /home and /etc/ssh, and this project's source and
// build trees hidden, so a host is like a real machine: only what the client sends is there.
// The system (/usr, /etc) is this machine's. Tests get real SSH, real
// SFTP and real direct-tcpip tunnels without a cloud. Needs root, `ip` and `/usr/sbin/sshd`;
// callers check available() and skip with its reason otherwise.
//
// Names carry a "sky" prefix, the creating pid (base 32) and a per-process counter, so parallel
// test processes never collide and a later run can sweep what a crashed run left behind. A run
// that is killed (ctest's time limit, SIGTERM, SIGKILL) leaves nothing either: each TestHosts has
// a reaper, a small process in a session of its own (a kill of the test's process group misses
// it) that waits for the test process to end and, unless teardown finished first, kills what runs
// in the hosts and removes their namespaces, links and directory.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

/// In a Catch2 test: skip (with the reason) where test hosts cannot be made here.
#define SKIP_WITHOUT_HOSTS()                             \
    do {                                                 \
        std::string why_;                                \
        if (!::sky::test::TestHosts::available(&why_)) { \
            WARN("skipped: " << why_);                   \
            return;                                      \
        }                                                \
    } while (0)

namespace sky::test {

/// Worker processes started from a node's shipped program directory (~/.sky/prog/...), on the
/// hosts of this process (not those of other test processes running beside it).
int remote_workers();

/// Polls `ok` every 100 ms until it holds or `limit` passes; returns its last answer.
bool wait_until(const std::function<bool()>& ok, std::chrono::seconds limit);

/// Result of a helper command: exit status (-1 when killed or not started) and its output.
struct CommandResult {
    int status = -1;
    std::string output;  ///< stdout and stderr together
    bool timed_out = false;
};

/// Runs argv (argv[0] looked up in PATH) with a bounded wait; kills it when the time is up.
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(20));

/// How the test hosts' sshd differs from a stock one.
struct TestHostOptions {
    /// False: no sftp subsystem, as on hardened hosts (uploads must go through exec).
    bool sftp = true;
};

class TestHosts {
public:
    /// True when this process can create test hosts; otherwise *why says what is missing.
    static bool available(std::string* why);

    /// Creates n hosts (1..64). Throws std::runtime_error (having cleaned up) when setup fails.
    explicit TestHosts(int n, TestHostOptions options = {});
    ~TestHosts();
    TestHosts(const TestHosts&) = delete;
    TestHosts& operator=(const TestHosts&) = delete;

    [[nodiscard]] int size() const { return static_cast<int>(hosts_.size()); }
    /// IPv4 address of host i, reachable from the root namespace.
    [[nodiscard]] const std::string& address(int i) const;
    [[nodiscard]] std::uint16_t port(int i) const;
    /// "SHA256:<base64 without padding>", as `ssh-keygen -l` prints it.
    [[nodiscard]] const std::string& host_key_fingerprint(int i) const;
    /// "ssh-ed25519 AAAA... comment"
    [[nodiscard]] const std::string& host_public_key(int i) const;
    /// "<address> ssh-ed25519 AAAA..." for a known_hosts file.
    [[nodiscard]] std::string known_hosts_line(int i) const;
    /// A known_hosts file with every host's line.
    [[nodiscard]] std::filesystem::path known_hosts_file() const;
    /// Private key (OpenSSH format, ed25519, no passphrase) that every host authorizes for root.
    [[nodiscard]] std::filesystem::path client_key_path() const;
    [[nodiscard]] std::string user() const { return "root"; }
    /// Network namespace name of host i (for `ip netns exec`).
    [[nodiscard]] const std::string& netns(int i) const;
    /// An address in this run's subnet that no host uses: connecting to it never succeeds.
    [[nodiscard]] std::string unused_address() const;
    /// Kills every sshd (listener and per-connection processes) in host i's namespace.
    void kill_sshd(int i);
    /// Kills every process in host i's namespace (sshd, and whatever a test started there).
    void kill_all_processes(int i);
    /// Plays a cloud's first boot: kills every process in host i's namespace, then starts its
    /// sshd with this host private key (OpenSSH format) and these authorized keys (for root).
    /// host_public_key(i) and host_key_fingerprint(i) follow the new key.
    void restart_sshd(int i, const std::string& host_private_key,
                      const std::string& authorized_keys);
    /// Moves the calling thread (only it) into host i's network namespace, e.g. to serve a
    /// socket on the host's 127.0.0.1 from the test process. Threads it starts inherit it.
    void enter_netns(int i) const;
    /// Takes host i's link down (a silent network partition: packets vanish) or back up.
    void set_link_up(int i, bool up);
    /// The bridge every host hangs on; traffic from this machine to the hosts leaves through
    /// its egress (benchmarks shape it with `tc`), host-to-host traffic does not.
    [[nodiscard]] const std::string& bridge() const { return bridge_; }
    /// The per-run directory (keys, configs, logs).
    [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
    /// Where host i's private directory `path` (under /root, /tmp or /home, as the host sees
    /// it) lies in this machine's file system.
    [[nodiscard]] std::filesystem::path host_path(int i, const std::filesystem::path& path) const;
    /// OpenSSH's `ssh` running `command` on host i as root with this run's key and known_hosts
    /// (an argv for run_command): what a person would type, as a baseline or a probe.
    [[nodiscard]] std::vector<std::string> ssh_command(int i, const std::string& command) const;
    /// The sshd log of host i (for failure messages).
    [[nodiscard]] std::string sshd_log(int i) const;

private:
    struct Host {
        std::string netns;
        std::string veth;  // root-namespace end, enslaved to the bridge
        std::string address;
        std::string public_key;
        std::string fingerprint;
        std::filesystem::path config;
        std::filesystem::path log;
        int sshd_pid = -1;
    };
    void setup(int n);
    void teardown() noexcept;
    void start_reaper(int n);
    void stop_reaper() noexcept;
    void start_sshd(Host& h, int i, bool die_with_parent = true);
    void write_sshd_config(Host& h, int i, const std::filesystem::path& host_key,
                           const std::filesystem::path& authorized_keys);
    [[nodiscard]] std::filesystem::path host_root(int i) const;
    void make_host_root(int i);
    void wait_listening(Host& h, std::chrono::milliseconds timeout);

    std::string tag_;     // pid (base 32) + "x" + counter (base 32)
    std::string bridge_;  // "skyb" + tag
    std::string subnet_;  // "10.A.B."
    std::filesystem::path dir_;
    std::vector<Host> hosts_;
    TestHostOptions options_;
    int reaper_pid_ = -1;  // the reaper (see the file comment)
    int reaper_fd_ = -1;   // the write end of its pipe: EOF without "done" means we died
};

}  // namespace sky::test
