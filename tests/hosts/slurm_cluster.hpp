#pragma once
// A real Slurm cluster of test hosts: Debian's slurmctld, slurmd and munged, each host a network
// namespace with its own mount and UTS namespaces (its own hostname, /etc/slurm, /etc/munge,
// /run, /root, /home, /tmp; this project's sources and build tree hidden). The login host runs
// munged, slurmctld and an OpenSSH sshd, and is the only host the client (this namespace)
// reaches; the compute hosts run munged and slurmd on a cluster network that only the login
// host is on. GPUs are declared in GRES with device nodes of their own (slurmd refuses file-less
// GPUs). Compute hosts share the login host's /root and /home, or have their own.
//
// Needs root, `ip`, `nsenter`, sshd, slurmctld, slurmd and munged; callers check available()
// and skip with its reason otherwise. Names follow tests/hosts/test_hosts.hpp's scheme (prefix,
// creating pid in base 32, 'x'), so that a crashed run's namespaces and links are swept.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "hosts/test_hosts.hpp"
#include "sky/providers.hpp"

/// In a Catch2 test: skip (with the reason) where a Slurm cluster cannot be made here.
#define SKIP_WITHOUT_SLURM()                                \
    do {                                                    \
        std::string why_;                                   \
        if (!::sky::test::SlurmCluster::available(&why_)) { \
            WARN("skipped: " << why_);                      \
            return;                                         \
        }                                                   \
    } while (0)

namespace sky::test {

struct SlurmClusterOptions {
    int compute_nodes = 2;  ///< 1..8
    int gpus_per_node = 2;  ///< fake GPUs declared in GRES (0: none)
    std::string gpu_type = "h100";
    bool shared_home = true;  ///< compute hosts see the login host's /root and /home
    std::string partition = "gpu";
    /// A second partition, `urgent`, on the same nodes with a higher priority tier, whose jobs
    /// preempt (cancel) the jobs of `partition` (PreemptType=preempt/partition_prio,
    /// PreemptMode=CANCEL).
    bool preemption = false;
    /// The login host's sshd runs from a copy named `sshd-session`, so that its processes are
    /// called as OpenSSH 9.8 and later call the per-connection ones: nothing of sky's may go
    /// by sshd's process names.
    bool sshd_session_name = false;
};

class SlurmCluster {
public:
    /// True when this process can make a cluster; otherwise *why says what is missing.
    static bool available(std::string* why);

    /// Starts the hosts and daemons and waits until every node is idle. Throws
    /// std::runtime_error (having cleaned up) when setup fails.
    explicit SlurmCluster(SlurmClusterOptions options = {});
    ~SlurmCluster();
    SlurmCluster(const SlurmCluster&) = delete;
    SlurmCluster& operator=(const SlurmCluster&) = delete;

    /// "root@<login address>:22", for sky::Slurm::login.
    [[nodiscard]] std::string login() const;
    [[nodiscard]] const std::string& login_address() const { return login_address_; }
    /// The link in this (the client's) namespace that leads to the login host: down, the
    /// login host cannot be reached (`ip link set <it> down`).
    [[nodiscard]] const std::string& client_link() const { return veth_; }
    [[nodiscard]] std::filesystem::path client_key_path() const;
    [[nodiscard]] std::filesystem::path known_hosts_file() const;
    [[nodiscard]] const SlurmClusterOptions& options() const { return options_; }
    [[nodiscard]] int size() const { return options_.compute_nodes; }
    /// Slurm's name of compute node i ("c0"), which is also its host name.
    [[nodiscard]] std::string node_name(int i) const;
    /// Compute node i's address on the cluster network.
    [[nodiscard]] std::string node_address(int i) const;

    /// Runs a bash script on the login host as root, as an admin's shell there would.
    CommandResult on_login(const std::string& script,
                           std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
    /// Runs a bash script on compute node i.
    CommandResult on_node(int i, const std::string& script,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
    /// The ids of every job in squeue (any user, any state squeue shows by default).
    [[nodiscard]] std::vector<std::string> queue() const;
    /// Processes on host `host` (-1: login, else compute node i) other than the cluster's own
    /// (its holder, munged, slurmctld, slurmd, sshd), one "pid comm args" line each: what a
    /// job or a pool left.
    [[nodiscard]] std::vector<std::string> job_processes(int host) const;
    /// Where `path` of host `host` (-1: login, else compute node i) lies in this machine's file
    /// system, for /root, /home and /tmp.
    [[nodiscard]] std::filesystem::path host_path(int host,
                                                  const std::filesystem::path& path) const;
    /// The tails of slurmctld's and each slurmd's log (for failure messages).
    [[nodiscard]] std::string logs() const;

private:
    struct Host {
        std::string name;   // host name and Slurm node name ("login", "c0")
        std::string netns;  // network namespace
        std::string address;
        std::filesystem::path dir;
        int holder = -1;  // the process that holds its mount and UTS namespaces
    };
    void setup();
    void teardown() noexcept;
    void make_network();
    void write_config();
    void start_holder(Host& h, const Host& home_from);
    int spawn(const Host& h, const std::vector<std::string>& argv, const std::string& log);
    CommandResult on_host(const Host& h, const std::string& script,
                          std::chrono::milliseconds timeout) const;

    SlurmClusterOptions options_;
    std::string tag_;
    std::string bridge_, veth_, subnet_, login_address_;
    std::filesystem::path dir_;
    Host login_;
    std::vector<Host> nodes_;
    std::vector<int> children_;  // every process this fixture forked (reaped at teardown)
};

/// sky::Slurm for the cluster: its login, key and known_hosts, and its partition.
inline sky::Slurm slurm_provider(const SlurmCluster& c) {
    sky::Slurm s;
    s.login = c.login();
    s.partition = c.options().partition;
    s.identity_file = c.client_key_path().string();
    s.known_hosts = c.known_hosts_file().string();
    return s;
}

}  // namespace sky::test
