#pragma once
// A real Kubernetes cluster for tests (tests/hosts/kubernetes/cluster.sh): etcd, kube-apiserver on
// loopback, kube-controller-manager, kube-scheduler, and one or two kubelets driving containerd,
// runc and CNI in private mount namespaces, on a bridge of the cluster's own. The binaries and
// images come from the cache build.sh fills (Debian's `kubernetes` source; 10+ minutes cold,
// which scripts/test.sh does before the suite): where it is not built, available() says so and
// tests skip. One cluster per machine at a time (a lock); a cluster whose test process died is
// torn down by the next fixture. Teardown leaves no process, mount, bridge, cgroup or file.
#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include "hosts/test_hosts.hpp"

/// In a Catch2 test: skip (with the reason) where a Kubernetes test cluster cannot run here.
#define SKIP_WITHOUT_KUBERNETES()                                \
    do {                                                         \
        std::string why_;                                        \
        if (!::sky::test::KubernetesCluster::available(&why_)) { \
            WARN("skipped: " << why_);                           \
            return;                                              \
        }                                                        \
    } while (0)

namespace sky::test {

class KubernetesCluster {
public:
    /// True when a cluster can be brought up here (root, the tools, the built cache);
    /// otherwise *why says what is missing.
    static bool available(std::string* why);

    /// Brings a cluster of `nodes` (1 or 2) nodes up and waits until they are Ready and the
    /// namespace `sky-test` is usable. Throws std::runtime_error (having torn down) on failure.
    explicit KubernetesCluster(int nodes = 1);
    /// Tears it down (cluster.sh down).
    ~KubernetesCluster();
    KubernetesCluster(const KubernetesCluster&) = delete;
    KubernetesCluster& operator=(const KubernetesCluster&) = delete;

    /// A value of the cluster's env file: SKY_KUBE_SERVER, SKY_KUBE_CA, SKY_KUBE_ADMIN,
    /// SKY_KUBE_USER, SKY_KUBE_NAMESPACE, SKY_KUBE_BASE_IMAGE, SKY_KUBE_BRIDGE, SKY_KUBE_CGROUP.
    [[nodiscard]] std::string env(const std::string& key) const;
    /// A kubeconfig of a system:masters user.
    [[nodiscard]] std::string admin_kubeconfig() const { return env("SKY_KUBE_ADMIN"); }
    /// A kubeconfig of a user with only the Role `sky-user` in `sky-test` (its context's
    /// namespace).
    [[nodiscard]] std::string user_kubeconfig() const { return env("SKY_KUBE_USER"); }
    [[nodiscard]] std::string ns() const { return env("SKY_KUBE_NAMESPACE"); }
    [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

    /// The API as the admin: METHOD PATH [JSON]. Returns the answer's body; throws
    /// std::runtime_error on an HTTP error (with the answer).
    std::string api(const std::string& method, const std::string& path,
                    const std::string& body = "") const;
    /// Creates a pod in `sky-test` running `command` (a JSON array) in the base image, as
    /// container "main", and waits until it is Running. Throws (with its status) otherwise.
    void run_pod(const std::string& name, const std::string& command_json,
                 std::chrono::seconds limit = std::chrono::seconds(60)) const;
    /// The pod's status.phase ("" when it does not exist).
    [[nodiscard]] std::string pod_phase(const std::string& name) const;
    /// The last lines of the cluster's logs (for failure messages).
    [[nodiscard]] std::string logs() const;

private:
    std::filesystem::path dir_;
    std::map<std::string, std::string> env_;
    int lock_fd_ = -1;
};

}  // namespace sky::test
