#include "hosts/kubernetes/kubernetes_cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sky::test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kScripts = fs::path(SKY_TEST_SOURCE_DIR) / "tests/hosts/kubernetes";
constexpr const char* kDirPrefix = "sky-kube-";
std::atomic<unsigned> g_counter{0};

fs::path tmp_dir() {
    const char* t = std::getenv("TMPDIR");
    return t && *t ? fs::path(t) : fs::path("/tmp");
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

bool alive(long pid) {
    return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// Clusters whose test process is gone (killed before its teardown): down, under the lock.
void sweep() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(tmp_dir(), ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(kDirPrefix, 0) != 0 || !e.is_directory()) continue;
        const std::string owner = trimmed(read_text(e.path() / "owner"));
        long pid = 0;
        try {
            pid = owner.empty() ? 0 : std::stol(owner);
        } catch (...) {
            pid = 0;
        }
        if (alive(pid)) continue;
        run_command({(kScripts / "cluster.sh").string(), "down", e.path().string()}, 60s);
    }
}

}  // namespace

bool KubernetesCluster::available(std::string* why) {
    auto no = [&](const std::string& w) {
        if (why) *why = w;
        return false;
    };
    if (::geteuid() != 0) return no("a Kubernetes test cluster needs root");
    for (const char* tool :
         {"etcd", "containerd", "runc", "ctr", "curl", "openssl", "unshare", "python3", "ip"}) {
        if (run_command({"sh", "-c", std::string("command -v ") + tool}, 5s).status != 0)
            return no(std::string("a Kubernetes test cluster needs ") + tool +
                      " (scripts/install-deps.sh installs it)");
    }
    if (!fs::exists("/usr/lib/cni/bridge"))
        return no("a Kubernetes test cluster needs the CNI plugins (containernetworking-plugins)");
    if (!fs::exists("/sys/fs/cgroup/pids/cgroup.procs") &&
        !fs::exists("/sys/fs/cgroup/memory/cgroup.procs"))
        return no("a Kubernetes test cluster (kubelet 1.20) needs cgroup v1 hierarchies");
    const auto dir = run_command({(kScripts / "build.sh").string(), "--dir"}, 10s);
    const fs::path cache = trimmed(dir.output);
    if (dir.status != 0 || !fs::exists(cache / "bin/.ready") ||
        !fs::exists(cache / "images/.ready"))
        return no("the test cluster's Kubernetes binaries and images are not built in " +
                  cache.string() +
                  " (tests/hosts/kubernetes/build.sh; scripts/test.sh builds them)");
    return true;
}

KubernetesCluster::KubernetesCluster(int nodes) {
    // One cluster per machine: its bridge's subnet is fixed. Wait for the one before (bounded).
    const fs::path lock = tmp_dir() / "sky-kube-cluster.lock";
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ < 0) throw std::runtime_error("kubernetes cluster: cannot open " + lock.string());
    const auto until = std::chrono::steady_clock::now() + 15min;
    while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
        if (std::chrono::steady_clock::now() > until) {
            ::close(lock_fd_);
            throw std::runtime_error("kubernetes cluster: another cluster held " + lock.string() +
                                     " for 15 minutes");
        }
        std::this_thread::sleep_for(500ms);
    }
    sweep();
    dir_ = tmp_dir() /
           (kDirPrefix + std::to_string(::getpid()) + "x" + std::to_string(g_counter.fetch_add(1)));
    const auto up = run_command(
        {(kScripts / "cluster.sh").string(), "up", dir_.string(), std::to_string(nodes)}, 240s);
    if (up.status != 0) {
        run_command({(kScripts / "cluster.sh").string(), "down", dir_.string()}, 60s);
        ::close(lock_fd_);
        throw std::runtime_error("kubernetes cluster: bring-up failed (status " +
                                 std::to_string(up.status) + (up.timed_out ? ", timed out" : "") +
                                 "):\n" + up.output);
    }
    std::istringstream in(read_text(dir_ / "env"));
    for (std::string line; std::getline(in, line);) {
        const auto eq = line.find('=');
        if (eq != std::string::npos) env_[line.substr(0, eq)] = line.substr(eq + 1);
    }
}

KubernetesCluster::~KubernetesCluster() {
    run_command({(kScripts / "cluster.sh").string(), "down", dir_.string()}, 90s);
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string KubernetesCluster::env(const std::string& key) const {
    const auto it = env_.find(key);
    return it == env_.end() ? std::string() : it->second;
}

std::string KubernetesCluster::api(const std::string& method, const std::string& path,
                                   const std::string& body) const {
    std::vector<std::string> argv{(kScripts / "cluster.sh").string(), "api", dir_.string(), method,
                                  path};
    if (!body.empty()) argv.push_back(body);
    const auto r = run_command(argv, 30s);
    if (r.status != 0)
        throw std::runtime_error("kubernetes cluster: " + method + " " + path +
                                 " failed: " + r.output);
    return r.output;
}

std::string KubernetesCluster::pod_phase(const std::string& name) const {
    const auto r = run_command({(kScripts / "cluster.sh").string(), "api", dir_.string(), "GET",
                                "/api/v1/namespaces/sky-test/pods/" + name},
                               30s);
    if (r.status != 0) return {};
    const auto at = r.output.find("\"phase\":");
    if (at == std::string::npos) return {};
    const auto open = r.output.find('"', at + 8);
    const auto close = r.output.find('"', open + 1);
    return r.output.substr(open + 1, close - open - 1);
}

void KubernetesCluster::run_pod(const std::string& name, const std::string& command_json,
                                std::chrono::seconds limit) const {
    api("POST", "/api/v1/namespaces/sky-test/pods",
        R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ")" + name +
            R"("}, "spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1, "containers": [{"name": "main", "image": ")" +
            env("SKY_KUBE_BASE_IMAGE") + R"(", "imagePullPolicy": "Never", "command": )" +
            command_json + "}]}}");
    if (!wait_until([&] { return pod_phase(name) == "Running"; }, limit))
        throw std::runtime_error("kubernetes cluster: pod " + name + " not Running within " +
                                 std::to_string(limit.count()) +
                                 " s: " + api("GET", "/api/v1/namespaces/sky-test/pods/" + name) +
                                 "\n" + logs());
}

std::string KubernetesCluster::logs() const {
    return run_command({(kScripts / "cluster.sh").string(), "logs", dir_.string()}, 10s).output;
}

}  // namespace sky::test
