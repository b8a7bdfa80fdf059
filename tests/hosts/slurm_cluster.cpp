#include "hosts/slurm_cluster.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace sky::test {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The names of tests/hosts/test_hosts.cpp (its sweep reads the creator's pid back from them),
// with a 'y' after the 'x' so that they never equal a TestHosts run's names.
constexpr const char* kNetnsPrefix = "skyn";
constexpr const char* kBridgePrefix = "skyb";
constexpr const char* kVethPrefix = "skyv";
constexpr const char* kDirPrefix = "sky-test-hosts-";
constexpr const char* kLockFile = "/run/lock/sky-test-hosts.lock";
constexpr const char* kClusterNet = "10.77.0.";

std::atomic<unsigned> g_counter{0};

std::string base32(unsigned long v) {
    const char* digits = "0123456789abcdefghijklmnopqrstuv";
    std::string s;
    do {
        s.insert(s.begin(), digits[v % 32]);
        v /= 32;
    } while (v != 0);
    return s;
}

long pid_of(const std::string& name, std::size_t prefix) {
    const auto x = name.find('x', prefix);
    if (x == std::string::npos || x + 1 >= name.size() || name[x + 1] != 'y') return 0;
    long v = 0;
    for (std::size_t i = prefix; i < x; ++i) {
        const char c = name[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'v' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v * 32 + d;
    }
    return v;
}

bool alive(long pid) {
    return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

void write_file(const fs::path& p, const std::string& text, int mode = 0644) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error("slurm cluster: cannot write " + p.string());
    ::chmod(p.c_str(), static_cast<mode_t>(mode));
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

CommandResult ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"ip"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, seconds(15));
}

void ip_or_throw(const std::vector<std::string>& args) {
    auto r = ip(args);
    if (r.status != 0) {
        std::string cmd = "ip";
        for (const auto& a : args) cmd += " " + a;
        throw std::runtime_error("slurm cluster: `" + cmd + "` failed: " + r.output);
    }
}

// Every process whose network namespace is `netns`.
std::vector<pid_t> pids_in(const std::string& netns) {
    std::vector<pid_t> pids;
    struct stat ns {};
    if (::stat(("/run/netns/" + netns).c_str(), &ns) != 0) return pids;
    DIR* d = ::opendir("/proc");
    if (!d) return pids;
    while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != '\0') continue;
        struct stat st {};
        if (::stat((std::string("/proc/") + e->d_name + "/ns/net").c_str(), &st) == 0 &&
            st.st_ino == ns.st_ino && st.st_dev == ns.st_dev)
            pids.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(d);
    return pids;
}

void kill_all_in(const std::string& netns) {
    const auto until = Clock::now() + seconds(10);
    for (int round = 0; round < 500 && Clock::now() < until; ++round) {
        int left = 0;
        for (pid_t p : pids_in(netns)) {
            if (p == ::getpid()) continue;
            ++left;
            ::kill(p, SIGKILL);
        }
        if (left == 0) return;
        std::this_thread::sleep_for(milliseconds(20));
    }
}

class Lock {
public:
    Lock() {
        fd_ = ::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) fd_ = ::open("/tmp/sky-test-hosts.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) throw std::runtime_error("slurm cluster: cannot open the lock file");
        const auto until = Clock::now() + seconds(60);
        while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            if (Clock::now() > until) {
                ::close(fd_);
                throw std::runtime_error("slurm cluster: lock file held for over 60 s");
            }
            std::this_thread::sleep_for(milliseconds(20));
        }
    }
    ~Lock() {
        ::flock(fd_, LOCK_UN);
        ::close(fd_);
    }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

private:
    int fd_ = -1;
};

// What a crashed cluster run left: its namespaces (and their processes), links, directory.
void sweep() {
    if (DIR* d = ::opendir("/run/netns")) {
        std::vector<std::string> names;
        while (dirent* e = ::readdir(d))
            if (std::string(e->d_name).rfind(kNetnsPrefix, 0) == 0) names.emplace_back(e->d_name);
        ::closedir(d);
        for (const auto& n : names) {
            const long pid = pid_of(n, 4);
            if (pid == 0 || alive(pid)) continue;
            kill_all_in(n);
            ip({"netns", "del", n});
        }
    }
    std::istringstream links(ip({"-o", "link", "show"}).output);
    for (std::string line; std::getline(links, line);) {
        const auto c = line.find(": ");
        if (c == std::string::npos) continue;
        const std::string rest = line.substr(c + 2);
        const std::string name = rest.substr(0, rest.find_first_of(":@"));
        if (name.rfind(kBridgePrefix, 0) != 0 && name.rfind(kVethPrefix, 0) != 0) continue;
        const long pid = pid_of(name, 4);
        if (pid != 0 && !alive(pid)) ip({"link", "del", name});
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind(kDirPrefix, 0) != 0) continue;
        const long pid = pid_of(n, std::strlen(kDirPrefix));
        if (pid != 0 && !alive(pid)) fs::remove_all(e.path(), ec);
    }
}

bool on_path(const std::string& name) {
    for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"})
        if (::access((std::string(dir) + "/" + name).c_str(), X_OK) == 0) return true;
    return false;
}

}  // namespace

bool SlurmCluster::available(std::string* why) {
    auto no = [&](std::string m) {
        if (why) *why = std::move(m);
        return false;
    };
    if (::geteuid() != 0) return no("a Slurm test cluster needs root (namespaces, daemons)");
    for (const char* tool : {"ip", "nsenter", "sshd", "ssh-keygen", "slurmctld", "slurmd", "munged",
                             "sbatch", "squeue", "srun", "sleep"})
        if (!on_path(tool))
            return no(std::string("a Slurm test cluster needs ") + tool +
                      " (slurm-wlm, munge, openssh-server, util-linux, iproute2)");
    return true;
}

SlurmCluster::SlurmCluster(SlurmClusterOptions options) : options_(std::move(options)) {
    std::string why;
    if (!available(&why)) throw std::runtime_error(why);
    if (options_.compute_nodes < 1 || options_.compute_nodes > 8)
        throw std::runtime_error("slurm cluster: between 1 and 8 compute nodes");
    tag_ = base32(static_cast<unsigned long>(::getpid())) + "xy" +
           base32(g_counter.fetch_add(1) % 1024);
    try {
        setup();
    } catch (...) {
        teardown();
        throw;
    }
}

SlurmCluster::~SlurmCluster() { teardown(); }

std::string SlurmCluster::login() const { return "root@" + login_address_ + ":22"; }
fs::path SlurmCluster::client_key_path() const { return dir_ / "client_ed25519"; }
fs::path SlurmCluster::known_hosts_file() const { return dir_ / "known_hosts"; }
std::string SlurmCluster::node_name(int i) const {
    return nodes_.at(static_cast<std::size_t>(i)).name;
}
std::string SlurmCluster::node_address(int i) const {
    return nodes_.at(static_cast<std::size_t>(i)).address;
}

void SlurmCluster::setup() {
    std::string tmpl = (fs::temp_directory_path() / (kDirPrefix + tag_ + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("slurm cluster: mkdtemp failed");
    dir_ = tmpl;
    login_.name = "login";
    login_.netns = kNetnsPrefix + tag_ + "l";
    login_.dir = dir_ / "login";
    for (int i = 0; i < options_.compute_nodes; ++i) {
        Host h;
        h.name = "c" + std::to_string(i);
        h.netns = kNetnsPrefix + tag_ + h.name;
        h.address = kClusterNet + std::to_string(10 + i);
        h.dir = dir_ / h.name;
        nodes_.push_back(h);
    }
    make_network();
    write_config();
    // Keys: the client's, and the login host's host key, pinned in known_hosts.
    for (const auto& [file, comment] :
         {std::pair{client_key_path(), "sky-slurm-test-client"},
          std::pair{login_.dir / "etc-ssh" / "ssh_host_ed25519_key", "sky-slurm-test-login"}}) {
        auto r = run_command(
            {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", file.string()});
        if (r.status != 0) throw std::runtime_error("slurm cluster: ssh-keygen: " + r.output);
    }
    fs::copy_file(client_key_path().string() + ".pub", login_.dir / "root/.ssh/authorized_keys");
    std::string pub = read_file(login_.dir / "etc-ssh/ssh_host_ed25519_key.pub");
    write_file(known_hosts_file(), login_address_ + " " + pub);

    start_holder(login_, login_);
    for (auto& n : nodes_) start_holder(n, options_.shared_home ? login_ : n);
    // munged on every host, then the controller, then the nodes' daemons.
    auto all = nodes_;
    all.insert(all.begin(), login_);
    for (const auto& h : all)
        spawn(h, {"/usr/sbin/munged", "-F", "--force"}, (h.dir / "munged.out").string());
    for (const auto& h : all)
        if (!wait_until(
                [&] {
                    return on_host(h, "test -S /run/munge/munge.socket.2", seconds(10)).status == 0;
                },
                seconds(15)))
            throw std::runtime_error("slurm cluster: munged did not start on " + h.name + ": " +
                                     read_file(h.dir / "munged.out"));
    spawn(login_, {"/usr/sbin/slurmctld", "-D", "-i"}, (login_.dir / "slurmctld.out").string());
    if (!wait_until(
            [&] {
                return on_login("scontrol ping", seconds(10)).output.find("is UP") !=
                       std::string::npos;
            },
            seconds(30)))
        throw std::runtime_error("slurm cluster: slurmctld did not come up: " + logs());
    for (const auto& n : nodes_)
        spawn(n, {"/usr/sbin/slurmd", "-D", "-N", n.name}, (n.dir / "slurmd.out").string());
    if (!wait_until(
            [&] {
                auto r = on_login("sinfo --noheader --Node --format='%N %T'", seconds(10));
                // One line per node and partition (a node may be in two).
                std::set<std::string> idle;
                std::istringstream is(r.output);
                for (std::string name, state; is >> name >> state;)
                    if (state == "idle") idle.insert(name);
                return static_cast<int>(idle.size()) == options_.compute_nodes;
            },
            seconds(60)))
        throw std::runtime_error("slurm cluster: the nodes did not become idle: " +
                                 on_login("sinfo -N").output + logs());
    std::string sshd = "/usr/sbin/sshd";
    if (options_.sshd_session_name) {
        // In the login host's /root (its own or the shared one): visible there, at an absolute
        // path sshd re-executes.
        fs::copy_file("/usr/sbin/sshd", login_.dir / "root/sshd-session",
                      fs::copy_options::overwrite_existing);
        fs::permissions(login_.dir / "root/sshd-session", fs::perms(0755));
        sshd = "/root/sshd-session";
    }
    spawn(login_, {sshd, "-D", "-e", "-f", "/etc/ssh/sshd_config"},
          (login_.dir / "sshd.log").string());
    if (!wait_until(
            [&] {
                auto r = run_command(
                    {"bash", "-c", "exec 3<>/dev/tcp/" + login_address_ + "/22 && head -c 4 <&3"},
                    seconds(3));
                return r.output == "SSH-";
            },
            seconds(15)))
        throw std::runtime_error("slurm cluster: sshd on the login host did not start: " +
                                 read_file(login_.dir / "sshd.log"));
}

void SlurmCluster::make_network() {
    {
        Lock lock;
        sweep();
        // A /24 for the client's side that no other run (or anything else) uses.
        const auto addrs = ip({"-o", "-4", "addr", "show"}).output;
        const unsigned start = static_cast<unsigned>(::getpid()) * 13 + g_counter.load();
        for (unsigned k = 0; k < 4096 && subnet_.empty(); ++k) {
            const unsigned idx = (start + k) % 4096;
            const std::string s =
                "10." + std::to_string(216 + idx / 256) + "." + std::to_string(idx % 256) + ".";
            if (addrs.find(" " + s) == std::string::npos) subnet_ = s;
        }
        if (subnet_.empty()) throw std::runtime_error("slurm cluster: no free test subnet");
        bridge_ = kBridgePrefix + tag_;
        ip_or_throw({"link", "add", "name", bridge_, "type", "bridge", "forward_delay", "0"});
        ip_or_throw({"addr", "add", subnet_ + "1/24", "dev", bridge_});
        ip_or_throw({"link", "set", bridge_, "up"});
    }
    login_address_ = subnet_ + "10";
    login_.address = std::string(kClusterNet) + "1";
    veth_ = kVethPrefix + tag_;
    ip_or_throw({"netns", "add", login_.netns});
    ip_or_throw(
        {"link", "add", veth_, "type", "veth", "peer", "name", "eth0", "netns", login_.netns});
    ip_or_throw({"link", "set", veth_, "master", bridge_});
    ip_or_throw({"link", "set", veth_, "up"});
    ip_or_throw({"-n", login_.netns, "addr", "add", login_address_ + "/24", "dev", "eth0"});
    ip_or_throw({"-n", login_.netns, "link", "set", "eth0", "up"});
    ip_or_throw({"-n", login_.netns, "link", "set", "lo", "up"});
    // The cluster's network: a bridge inside the login host, which the compute hosts hang on.
    // Nothing routes it to the client's side.
    ip_or_throw(
        {"-n", login_.netns, "link", "add", "cluster", "type", "bridge", "forward_delay", "0"});
    ip_or_throw({"-n", login_.netns, "addr", "add", login_.address + "/24", "dev", "cluster"});
    ip_or_throw({"-n", login_.netns, "link", "set", "cluster", "up"});
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        auto& n = nodes_[i];
        const std::string link = "cl" + std::to_string(i);
        ip_or_throw({"netns", "add", n.netns});
        ip_or_throw({"-n", login_.netns, "link", "add", link, "type", "veth", "peer", "name",
                     "eth0", "netns", n.netns});
        ip_or_throw({"-n", login_.netns, "link", "set", link, "master", "cluster"});
        ip_or_throw({"-n", login_.netns, "link", "set", link, "up"});
        ip_or_throw({"-n", n.netns, "addr", "add", n.address + "/24", "dev", "eth0"});
        ip_or_throw({"-n", n.netns, "link", "set", "eth0", "up"});
        ip_or_throw({"-n", n.netns, "link", "set", "lo", "up"});
    }
}

void SlurmCluster::write_config() {
    auto all = nodes_;
    all.insert(all.begin(), login_);
    for (const auto& h : all) {
        for (const char* d :
             {"root/.ssh", "home", "tmp", "lib-munge", "log-munge", "lib-slurm/slurmctld",
              "lib-slurm/slurmd", "lib-slurm/gpu", "log-slurm", "etc-ssh"})
            fs::create_directories(h.dir / d);
        ::chmod((h.dir / "root").c_str(), 0700);
        ::chmod((h.dir / "tmp").c_str(), 01777);
    }
    // Fake GPUs: device nodes of the NVIDIA major, one per GPU, in each node's private
    // /var/lib/slurm (nothing opens them: the workers pick devices by index).
    for (const auto& n : nodes_)
        for (int g = 0; g < options_.gpus_per_node; ++g) {
            const auto p = n.dir / "lib-slurm/gpu" / ("nvidia" + std::to_string(g));
            if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(195, g)) != 0)
                throw std::runtime_error("slurm cluster: mknod " + p.string() + ": " +
                                         std::strerror(errno));
        }
    fs::create_directories(dir_ / "etc-slurm");
    fs::create_directories(dir_ / "etc-munge");
    std::string key(1024, '\0');
    {
        std::ifstream r("/dev/urandom", std::ios::binary);
        r.read(key.data(), static_cast<std::streamsize>(key.size()));
    }
    write_file(dir_ / "etc-munge/munge.key", key, 0400);
    ::chmod((dir_ / "etc-munge").c_str(), 0700);

    std::string hosts = "127.0.0.1 localhost\n" + login_.address + " login\n";
    for (const auto& n : nodes_) hosts += n.address + " " + n.name + "\n";
    write_file(dir_ / "hosts", hosts);

    const std::string last = std::to_string(options_.compute_nodes - 1);
    const std::string gres = options_.gpus_per_node > 0 ? "gpu:" + options_.gpu_type + ":" +
                                                              std::to_string(options_.gpus_per_node)
                                                        : "";
    std::string conf =
        "ClusterName=skytest\n"
        "SlurmctldHost=login(" +
        login_.address +
        ")\n"
        "SlurmUser=root\n"
        "SlurmdUser=root\n"
        "AuthType=auth/munge\n"
        "CredType=cred/munge\n"
        "StateSaveLocation=/var/lib/slurm/slurmctld\n"
        "SlurmdSpoolDir=/var/lib/slurm/slurmd\n"
        "SlurmctldPidFile=/run/slurmctld.pid\n"
        "SlurmdPidFile=/run/slurmd.pid\n"
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log\n"
        "SlurmdLogFile=/var/log/slurm/slurmd.log\n"
        // No cgroups here: processes are tracked by parentage, as on many clusters.
        "ProctrackType=proctrack/linuxproc\n"
        "TaskPlugin=task/none\n"
        "JobAcctGatherType=jobacct_gather/none\n"
        "AccountingStorageType=accounting_storage/none\n"
        "JobCompType=jobcomp/none\n"
        "MpiDefault=none\n"
        "SwitchType=switch/none\n"
        "SchedulerType=sched/backfill\n"
        "SelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\n"
        "ReturnToService=2\n"
        "SlurmdParameters=config_overrides\n" +
        std::string(gres.empty() ? "" : "GresTypes=gpu\n") +
        std::string(options_.preemption ? "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n"
                                        : "");
    for (const auto& n : nodes_)
        conf += "NodeName=" + n.name + " NodeAddr=" + n.address +
                " CPUs=4 RealMemory=1000 State=UNKNOWN" + (gres.empty() ? "" : " Gres=" + gres) +
                "\n";
    conf += "PartitionName=" + options_.partition + " Nodes=c[0-" + last +
            "] Default=YES MaxTime=INFINITE State=UP" +
            (options_.preemption ? " PriorityTier=1" : "") + "\n";
    if (options_.preemption)
        conf += "PartitionName=urgent Nodes=c[0-" + last +
                "] Default=NO MaxTime=INFINITE State=UP PriorityTier=2\n";
    write_file(dir_ / "etc-slurm/slurm.conf", conf);
    if (!gres.empty())
        write_file(dir_ / "etc-slurm/gres.conf",
                   "NodeName=c[0-" + last + "] Name=gpu Type=" + options_.gpu_type +
                       " File=/var/lib/slurm/gpu/nvidia[0-" +
                       std::to_string(options_.gpus_per_node - 1) + "]\n");
    // slurmd loads a cgroup plugin even when nothing uses it.
    write_file(dir_ / "etc-slurm/cgroup.conf", "CgroupPlugin=cgroup/v1\n");

    write_file(login_.dir / "etc-ssh/sshd_config",
               "ListenAddress " + login_address_ +
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
                   "X11Forwarding no\n"
                   "PrintMotd no\n"
                   "UseDNS no\n"
                   "LogLevel VERBOSE\n"
                   "Subsystem sftp internal-sftp\n");
}

void SlurmCluster::start_holder(Host& h, const Host& home_from) {
    // Everything the child needs, made before fork: after it, only system calls.
    struct Mount {
        std::string source, target, type;
        unsigned long flags;
        std::string data;
    };
    std::vector<Mount> mounts;
    // The build tree first: it may lie inside the sources, hidden next.
    for (const char* d : {SKY_TEST_BINARY_DIR, SKY_TEST_SOURCE_DIR})
        if (*d)
            mounts.push_back(
                {"tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=755"});
    mounts.push_back({"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m"});
    auto bind = [&](const fs::path& from, const char* to) {
        mounts.push_back({from.string(), to, "", MS_BIND, ""});
    };
    bind(dir_ / "hosts", "/etc/hosts");
    bind(dir_ / "etc-slurm", "/etc/slurm");
    bind(dir_ / "etc-munge", "/etc/munge");
    bind(h.dir / "lib-munge", "/var/lib/munge");
    bind(h.dir / "log-munge", "/var/log/munge");
    bind(h.dir / "lib-slurm", "/var/lib/slurm");
    bind(h.dir / "log-slurm", "/var/log/slurm");
    if (&h == &login_) bind(h.dir / "etc-ssh", "/etc/ssh");
    bind(home_from.dir / "root", "/root");
    bind(home_from.dir / "home", "/home");
    bind(h.dir / "tmp", "/tmp");  // last: the sources above lie under /tmp
    const std::string netns = "/run/netns/" + h.netns;
    const int nsfd = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) throw std::runtime_error("slurm cluster: cannot open " + netns);
    const std::string name = h.name;
    const char* argv[] = {"/bin/sleep", "infinity", nullptr};
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        if (::setns(nsfd, CLONE_NEWNET) != 0) ::_exit(120);
        if (::unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0) ::_exit(121);
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(122);
        if (::sethostname(name.c_str(), name.size()) != 0) ::_exit(123);
        int k = 0;
        for (const auto& m : mounts) {
            ++k;
            if (::mount(m.source.c_str(), m.target.c_str(),
                        m.type.empty() ? nullptr : m.type.c_str(), m.flags,
                        m.data.empty() ? nullptr : m.data.c_str()) != 0)
                ::_exit(k);
            if (m.target == "/run") {
                ::mkdir("/run/munge", 0755);
                ::mkdir("/run/sshd", 0755);
            }
        }
        ::execv(argv[0], const_cast<char* const*>(argv));
        ::_exit(126);
    }
    ::close(nsfd);
    if (pid < 0) throw std::runtime_error("slurm cluster: fork failed");
    children_.push_back(pid);
    h.holder = pid;
    // Ready once it runs sleep; an exit says which step failed.
    const auto until = Clock::now() + seconds(10);
    for (;;) {
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) == pid) {
            h.holder = -1;
            const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            const std::string what =
                code >= 1 && code <= static_cast<int>(mounts.size())
                    ? "mounting " + mounts[static_cast<std::size_t>(code - 1)].target
                    : "step " + std::to_string(code);
            throw std::runtime_error("slurm cluster: host " + h.name + " failed at " + what);
        }
        char exe[256] = {};
        const ssize_t n =
            ::readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
        if (n > 0 &&
            std::string(exe, static_cast<std::size_t>(n)).find("sleep") != std::string::npos)
            return;
        if (Clock::now() > until)
            throw std::runtime_error("slurm cluster: host " + h.name + " did not start");
        std::this_thread::sleep_for(milliseconds(10));
    }
}

int SlurmCluster::spawn(const Host& h, const std::vector<std::string>& argv,
                        const std::string& log) {
    const std::string base = "/proc/" + std::to_string(h.holder) + "/ns/";
    const int net = ::open((base + "net").c_str(), O_RDONLY | O_CLOEXEC);
    const int mnt = ::open((base + "mnt").c_str(), O_RDONLY | O_CLOEXEC);
    const int uts = ::open((base + "uts").c_str(), O_RDONLY | O_CLOEXEC);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = (net < 0 || mnt < 0 || uts < 0 || out < 0) ? -1 : ::fork();
    if (pid == 0) {
        // A daemon dies with the test process (its teardown, or the next run's sweep, ends
        // whatever it started).
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        if (::setns(net, CLONE_NEWNET) != 0 || ::setns(mnt, CLONE_NEWNS) != 0 ||
            ::setns(uts, CLONE_NEWUTS) != 0)
            ::_exit(125);
        if (::chdir("/") != 0) ::_exit(124);
        const int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        ::setsid();
        ::execv(args[0], args.data());
        ::_exit(126);
    }
    for (int fd : {net, mnt, uts, out})
        if (fd >= 0) ::close(fd);
    if (pid < 0)
        throw std::runtime_error("slurm cluster: cannot start " + argv[0] + " on " + h.name);
    children_.push_back(pid);
    return pid;
}

CommandResult SlurmCluster::on_host(const Host& h, const std::string& script,
                                    std::chrono::milliseconds timeout) const {
    return run_command({"nsenter", "--target", std::to_string(h.holder), "--mount", "--uts",
                        "--net", "--wd=/root", "--", "bash", "-c", script},
                       timeout);
}

CommandResult SlurmCluster::on_login(const std::string& script,
                                     std::chrono::milliseconds timeout) const {
    return on_host(login_, script, timeout);
}

CommandResult SlurmCluster::on_node(int i, const std::string& script,
                                    std::chrono::milliseconds timeout) const {
    return on_host(nodes_.at(static_cast<std::size_t>(i)), script, timeout);
}

std::vector<std::string> SlurmCluster::queue() const {
    auto r = on_login("squeue --noheader --format=%i", seconds(20));
    if (r.status != 0) throw std::runtime_error("squeue failed: " + r.output);
    std::vector<std::string> ids;
    std::istringstream is(r.output);
    for (std::string id; is >> id;) ids.push_back(id);
    return ids;
}

std::vector<std::string> SlurmCluster::job_processes(int host) const {
    const Host& h = host < 0 ? login_ : nodes_.at(static_cast<std::size_t>(host));
    std::vector<std::string> out;
    for (pid_t p : pids_in(h.netns)) {
        if (p == h.holder) continue;
        std::string comm = read_file("/proc/" + std::to_string(p) + "/comm");
        while (!comm.empty() && comm.back() == '\n') comm.pop_back();
        static const std::set<std::string> daemons = {"munged",       "slurmd", "slurmctld",
                                                      "slurmscriptd", "sshd",   "sshd-session"};
        if (comm.empty() || daemons.count(comm)) continue;
        std::string args = read_file("/proc/" + std::to_string(p) + "/cmdline");
        for (auto& c : args)
            if (c == '\0') c = ' ';
        out.push_back(std::to_string(p) + " " + comm + " " + args);
    }
    return out;
}

fs::path SlurmCluster::host_path(int host, const fs::path& path) const {
    const Host& h = host < 0 ? login_ : nodes_.at(static_cast<std::size_t>(host));
    const auto rel = path.lexically_relative("/");
    const auto first = *rel.begin();
    if (first == "tmp") return h.dir / rel;
    if (first == "root" || first == "home")
        return (host >= 0 && options_.shared_home ? login_.dir : h.dir) / rel;
    throw std::runtime_error("slurm cluster: " + path.string() + " is not in /root, /home or /tmp");
}

std::string SlurmCluster::logs() const {
    std::string s;
    auto tail = [&](const std::string& what, const fs::path& p) {
        std::string t = read_file(p);
        if (t.size() > 3000) t = t.substr(t.size() - 3000);
        s += "\n--- " + what + " ---\n" + t;
    };
    tail("slurmctld", login_.dir / "log-slurm/slurmctld.log");
    for (const auto& n : nodes_) tail("slurmd " + n.name, n.dir / "log-slurm/slurmd.log");
    return s;
}

void SlurmCluster::teardown() noexcept {
    try {
        for (const auto* h : {&login_}) kill_all_in(h->netns);
        for (const auto& n : nodes_) kill_all_in(n.netns);
        for (int pid : children_) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
        children_.clear();
        for (const auto& n : nodes_)
            if (!n.netns.empty()) ip({"netns", "del", n.netns});
        if (!login_.netns.empty()) ip({"netns", "del", login_.netns});
        if (!veth_.empty() && ip({"link", "show", veth_}).status == 0) ip({"link", "del", veth_});
        if (!bridge_.empty()) ip({"link", "del", bridge_});
        if (!dir_.empty()) {
            std::error_code ec;
            fs::remove_all(dir_, ec);
        }
    } catch (...) {
        // Best effort in a destructor; the next run's sweep finishes.
    }
}

}  // namespace sky::test
