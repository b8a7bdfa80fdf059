#pragma once
/// \file Where nodes come from (docs/api.md §5).
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

class CloudAdapter;  // sky/cloud.hpp

/// Nodes are worker processes on this machine: the same runtime as a cloud node, no cloud.
struct Local {
    static constexpr std::string_view name = "local";  ///< Provider::name(), `--provider`
    std::string workdir;  ///< working directory of the workers (empty: the client's)
};
/// Machines you already have, reached over SSH; node i is hosts[i].
struct SSH {
    static constexpr std::string_view name = "ssh";  ///< Provider::name(), `--provider`
    std::vector<std::string> hosts;
    std::string user = "root";
    int port = 22;
    std::string identity_file;  ///< private key (empty: ~/.ssh/id_ed25519)
    std::string
        known_hosts;  ///< known_hosts file pinning the hosts' keys (empty: ~/.ssh/known_hosts)
};
/// Amazon EC2.
struct AWS {
    static constexpr std::string_view name = "aws";  ///< Provider::name(), `--provider`
    std::string region = "us-east-1";
    bool use_ssm = false;
    std::string endpoint;  ///< empty: AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL, else AWS's
    std::string profile;   ///< empty: AWS_PROFILE, else "default"
};
/// RunPod GPU pods.
struct RunPod {
    static constexpr std::string_view name = "runpod";  ///< Provider::name(), `--provider`
    std::string cloud_type = "SECURE";
    std::string endpoint;
};
/// Vast.ai marketplace.
struct VastAI {
    static constexpr std::string_view name = "vastai";  ///< Provider::name(), `--provider`
    double min_reliability = 0.95;
    std::string endpoint;
};
/// Verda (formerly DataCrunch).
struct Verda {
    static constexpr std::string_view name = "verda";  ///< Provider::name(), `--provider`
    std::string region;                                ///< empty: first region with capacity
    std::string endpoint;
};
/// DigitalOcean GPU droplets.
struct DigitalOcean {
    static constexpr std::string_view name = "digitalocean";  ///< Provider::name(), `--provider`
    std::string region = "nyc1";
    std::string endpoint;
};

/// One failure a sky::Simulated cloud produces (docs/api.md §5a). Node numbers are pool nodes (0 to
/// nodes - 1). Each fault happens once, to the machine that serves its node at that moment: a
/// replacement machine gets no fault unless another fault names the same node.
struct Fault {
    enum class Kind { preempt, lose, lose_after_calls, fail_bootstrap, slow_bootstrap, freeze };
    Kind kind = Kind::lose;
    int node = 0;
    std::chrono::milliseconds after{0};  ///< since the pool started (preempt, lose, freeze)
    int calls = 0;                       ///< lose_after_calls: the machine dies after this call
    std::chrono::milliseconds delay{0};  ///< slow_bootstrap
    std::string message;                 ///< fail_bootstrap: the failing phase's output
    /// preempt: how long before the reclaim the cloud warns (a PreemptionNotice, api.md §10a);
    /// 0: no warning. At most `after`.
    std::chrono::milliseconds notice{0};

    /// The cloud reclaims the node's spot machine `after` the pool started.
    static Fault preempt(int node, std::chrono::milliseconds after) {
        return {Kind::preempt, node, after, 0, {}, {}};
    }
    /// As preempt(node, after), and the cloud warns `notice` earlier, at `after - notice`.
    static Fault preempt(int node, std::chrono::milliseconds after,
                         std::chrono::milliseconds notice) {
        return {Kind::preempt, node, after, 0, {}, {}, notice};
    }
    /// The node's machine dies `after` the pool started.
    static Fault lose(int node, std::chrono::milliseconds after) {
        return {Kind::lose, node, after, 0, {}, {}};
    }
    /// The node's machine dies right after its n-th call.
    static Fault lose_after_calls(int node, int n) {
        return {Kind::lose_after_calls, node, {}, n, {}, {}};
    }
    /// The node's bootstrap fails (BootstrapError) with this output.
    static Fault fail_bootstrap(int node, std::string message) {
        return {Kind::fail_bootstrap, node, {}, 0, {}, std::move(message)};
    }
    /// The node's bootstrap takes this much longer.
    static Fault slow_bootstrap(int node, std::chrono::milliseconds delay) {
        return {Kind::slow_bootstrap, node, {}, 0, delay, {}};
    }
    /// The node's worker stops answering `after` the pool started (heartbeats time out).
    static Fault freeze(int node, std::chrono::milliseconds after) {
        return {Kind::freeze, node, after, 0, {}, {}};
    }
};

/// A cloud in a box for tests (docs/api.md §5a): nodes are worker processes on this machine,
/// launched through the same cloud layer as every real cloud, with the catalog's offers and
/// prices and the failures a cloud produces. `SKY_SIMULATED` (JSON) adds capacity errors and
/// faults without recompiling.
struct Simulated {
    static constexpr std::string_view name = "simulated";  ///< Provider::name(), `--provider`
    int capacity_errors = 0;    ///< the first N launch attempts find no capacity
    std::vector<Fault> faults;  ///< what goes wrong, and when
    std::uint64_t seed = 0;     ///< makes any randomness reproducible
};

/// A Slurm cluster you already use (docs/api.md §5b): a pool is one job of `nodes` nodes, its
/// workers are steps of that job, and leaving the pool cancels it.
struct Slurm {
    static constexpr std::string_view name = "slurm";  ///< Provider::name(), `--provider`
    /// "user@host[:port]" of a login node reached over SSH; empty: this machine is a login node
    /// (sbatch and friends run here).
    std::string login;
    std::string partition;    ///< --partition, as given (empty: the cluster's default)
    std::string account;      ///< --account, as given
    std::string qos;          ///< --qos, as given
    std::string constraint;   ///< --constraint, as given
    std::string reservation;  ///< --reservation, as given
    /// How long the job may wait in the queue before the pool gives up (ProvisionError quoting
    /// Slurm's pending reason; the job is cancelled).
    std::chrono::seconds queue_timeout = std::chrono::hours(1);
    std::string identity_file;  ///< private key for the login node (empty: ~/.ssh/id_ed25519)
    std::string known_hosts;    ///< known_hosts pinning its key (empty: ~/.ssh/known_hosts)
};

/// Pods on a Kubernetes cluster you already have (docs/api.md §5c): node i is one pod, reached
/// only through the API server (exec and port-forward); nothing is installed in the cluster, and
/// leaving the pool deletes every pod and the one ConfigMap that owns them.
struct Kubernetes {
    static constexpr std::string_view name = "kubernetes";  ///< Provider::name(), `--provider`
    /// The kubeconfig context; empty: its current-context (in a pod with no kubeconfig: the
    /// pod's own cluster).
    std::string context;
    /// The namespace; empty: the context's, else "default".
    std::string ns;
    /// A kubeconfig path; empty: KUBECONFIG (a colon list, merged, first wins), else
    /// ~/.kube/config, else the pod's service account.
    std::string kubeconfig;
    /// The pods' base image; empty: SKY_KUBERNETES_IMAGE, else Ubuntu 24.04 (CUDA 12's runtime
    /// with a GPU).
    std::string image;
    /// Node labels the pods must match, added to sky's own GPU affinity.
    std::map<std::string, std::string> node_selector;
    /// Taints the pods tolerate, `key[=value]:Effect` as `kubectl taint` writes them.
    std::vector<std::string> tolerations;
    std::map<std::string, std::string> labels;       ///< extra pod labels (a Kueue queue)
    std::map<std::string, std::string> annotations;  ///< extra pod annotations (a cost centre)
    /// How long a pod may stay unscheduled before the pool gives up (ProvisionError quoting the
    /// scheduler); counted from the pod's creation.
    std::chrono::seconds queue_timeout = std::chrono::seconds(600);
    /// Price per node and hour for cost events and budgets (a cluster has no price list).
    double hourly_price = 0;
};

/// A user's own cloud: made from a type that implements sky::CloudAdapter (sky/cloud.hpp) by
/// Provider's converting constructor. Each pool gets its own copy of the adapter.
struct CustomCloud {
    std::string name;                                     ///< the adapter's name()
    std::function<std::unique_ptr<CloudAdapter>()> make;  ///< a fresh copy for one pool
};

/// A provider configuration, implicitly constructible from each config struct and from any
/// copyable type derived from sky::CloudAdapter.
class Provider {
public:
    using Config = std::variant<Local, SSH, AWS, RunPod, VastAI, Verda, DigitalOcean, Simulated,
                                Slurm, Kubernetes, CustomCloud>;

    // Out of line (src/providers/registry/provider.cpp), and the variant itself on the heap: a
    // program's translation unit never compiles the ten-way variant (its type machinery alone cost
    // more than the rest of this header), only a pointer to it.
    Provider();
    Provider(Local c);
    Provider(SSH c);
    Provider(AWS c);
    Provider(RunPod c);
    Provider(VastAI c);
    Provider(Verda c);
    Provider(DigitalOcean c);
    Provider(Simulated c);
    Provider(Slurm c);
    Provider(Kubernetes c);
    Provider(CustomCloud c);
    Provider(const Provider&);
    /// Leaves `o` a default (Local) provider.
    Provider(Provider&& o) noexcept;
    Provider& operator=(const Provider&);
    Provider& operator=(Provider&& o) noexcept;
    ~Provider();
    /// A user's adapter (include sky/cloud.hpp to define one): `.provider = MyCloud{...}`.
    template <class A>
    requires std::derived_from<A, CloudAdapter> && std::copy_constructible<A> Provider(A adapter)
        : Provider(custom(std::make_shared<const A>(std::move(adapter)))) {}

    /// "local", "ssh", "aws", "runpod", "vastai", "verda", "digitalocean", "simulated", "slurm",
    /// "kubernetes", or a custom adapter's name().
    [[nodiscard]] std::string_view name() const noexcept;
    /// The config if it is a C, else null.
    template <class C>
    [[nodiscard]] const C* get() const noexcept {
        return std::get_if<C>(config_ptr());
    }
    [[nodiscard]] const Config& config() const noexcept { return *config_ptr(); }

private:
    template <class A>
    static CustomCloud custom(std::shared_ptr<const A> prototype) {
        std::string n = prototype->name();
        return CustomCloud{std::move(n), [prototype]() -> std::unique_ptr<CloudAdapter> {
                               return std::make_unique<A>(*prototype);
                           }};
    }
    /// The config; a moved-from provider's is a default Local.
    [[nodiscard]] const Config* config_ptr() const noexcept;

    std::unique_ptr<Config> config_;  // null once moved from
};

SKY_PUBLIC_END
