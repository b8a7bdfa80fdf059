#pragma once
/// \file The cloud adapter: what a cloud must answer so that sky can run pools on it (docs/api.md
/// §5).
///
/// sky's cloud layer does everything that is the same on every cloud: it picks offers (the
/// adapter's live offers, or the embedded catalog's where the cloud gave none), walks them on
/// capacity errors with the pool's spot strategy, makes the pool's SSH key and each node's host
/// key, writes the ledger, waits for nodes to run, bootstraps them over SSH, replaces lost ones,
/// terminates and confirms, and sweeps by tag. An adapter is the cloud's REST mapping only: launch
/// one machine, describe machines, terminate them, list a pool's machines by tag. The built-in
/// clouds (AWS, RunPod, Vast.ai, Verda, DigitalOcean, Simulated) are adapters; a user's own adapter
/// becomes a provider by conversion: `.provider = MyCloud{...}` (see docs/providers.md).
///
/// The part of an adapter that `sky ls` and `sky gc` need, describe, terminate, list and the
/// pool's infrastructure, is its base MachineInventory: a provider whose machines are not
/// launched one by one over SSH (Slurm's jobs) implements that alone.
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sky/catalog.hpp"
#include "sky/events.hpp"
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// One machine as the cloud describes it.
struct CloudInstance {
    /// Where the machine is in its life. `unknown`: the cloud does not know the id (yet: just
    /// after launch on an eventually consistent API; or any more). `gone`: terminated or deleted.
    enum class State { pending, running, stopping, gone, unknown };
    std::string id;
    State state = State::pending;
    std::string public_ip;   ///< the address the client connects to
    std::string private_ip;  ///< how the pool's other nodes reach it (empty: public_ip)
    int ssh_port = 22;       ///< the SSH port the client connects to
    bool spot = false;       ///< spot, interruptible or bid capacity
    bool preempted = false;  ///< the cloud took it back (a spot reclaim, an outbid)
    std::string reason;      ///< the cloud's words on why it is stopping or gone
    std::string pool_id;     ///< the sky pool it belongs to (from its tag or name)
    std::string instance_type;
    std::string launched;  ///< when the cloud started it (ISO 8601, UTC); empty when unknown
    /// The machine's own SSH host key ("ssh-ed25519 AAAA..."), where the cloud reports it
    /// through its authenticated API: the pool pins this key instead of the boot script's (for
    /// a cloud that cannot run the boot script). Empty: the boot script installs the key.
    std::string host_public_key;
};

/// What launching one node needs. The adapter passes `boot_script` to the machine's first boot
/// (user data, a startup script, a container's start command) and tags the machine with
/// `pool_id` so that list() finds it even when launch's answer was lost.
struct LaunchRequest {
    std::string pool_id;
    std::string name;  ///< "sky-<pool id>": for names and tags
    int node = 0;
    Offer offer;
    bool spot = false;
    std::string client_token;    ///< idempotency token where the cloud has one (≤ 64 chars)
    std::string ssh_public_key;  ///< the pool's client key, "ssh-ed25519 AAAA... comment"
    std::string boot_script;     ///< a bash script: installs the node's pinned host key, etc.
};

/// What create_infra() is given: the pool and its client key.
struct InfraRequest {
    std::string pool_id;
    std::string name;            ///< "sky-<pool id>"
    std::string ssh_public_key;  ///< to register as the cloud's key pair / account key
};

/// How the client logs in to this cloud's nodes and what they may do on their own.
struct NodeLogin {
    std::string user = "root";
    /// A command the node's watchdog runs every 3 s on spot machines; exit status 0 is the
    /// cloud's notice that it takes the machine back (sky::preemption() on every rank, api.md
    /// §10a). Its first line `reclaim SECONDS REASON` gives the deadline (seconds since the
    /// epoch: the worker goes on until then), `warn SECONDS REASON` an earlier, softer notice
    /// (the machine may go, not before SECONDS); nothing printed: it goes now. Empty: the cloud
    /// gives no notice.
    std::string preemption_probe;
    /// Whether the node may power itself off when the pool's hard or idle timeout passes
    /// (clouds that terminate a machine that shuts down).
    bool power_off_on_expiry = true;
    /// Whether the host key from the boot script is replaced by one made on the node after the
    /// first pinned login (the boot script is readable through the cloud's metadata).
    bool rotate_host_key = true;
    /// How long a fresh machine may take to present the pinned host key (its boot script runs
    /// after sshd first starts); a mismatch until then is retried, never accepted.
    std::chrono::seconds boot_wait{300};
    /// The cloud has no firewall API and the adapter's boot script sets up sky's host firewall
    /// (SSH from the client, every port from the pool's own machines, nothing else in; the
    /// built-in Verda adapter's does): the cloud layer admits each machine's peers through it
    /// over SSH before its worker starts, admits a replacement on every machine, and says so
    /// in an ErrorEvent where a machine has no working firewall.
    bool host_firewall = false;
    /// The launch data (boot script) stays readable through the cloud's API for the machine's
    /// life: a failed host key rotation fails the node instead of leaving it on that key.
    bool launch_data_readable = false;
};

/// How long the cloud layer waits on the cloud while it launches and tears down.
struct CloudTimings {
    /// How long teardown keeps deleting the pool's infrastructure while
    /// MachineInventory::infra_left names something (a machine that has just ended can keep a
    /// firewall in use: EC2 keeps a terminated instance's network interface, and with it the
    /// security group, for seconds to minutes). What is left then is recorded in the ledger;
    /// `sky gc` deletes it later. A pool that never sent a launch (credentials refused at the
    /// start) waits at most 10 s.
    std::chrono::seconds infra_wait{120};
    /// How long a machine whose launch answer was lost (LaunchAnswerLostError) may take to show
    /// in list(pool_id): the pool looks for it this long before it moves on to the next offer.
    std::chrono::seconds lost_launch_wait{10};
};

/// What CloudAdapter::login() answers: the nodes' login and the cloud's timings in one value, so
/// that an adapter sets any field by name (`l.user = "ubuntu"; l.infra_wait = ...`).
struct CloudLogin : NodeLogin, CloudTimings {};

/// Thrown by CloudAdapter::launch when the offer has no capacity now: the pool moves on to the
/// next offer, or with a spot strategy that falls back, to the same offer on demand (any other
/// exception ends provisioning with a ProvisionError).
class CapacityError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Thrown by CloudAdapter::launch when the cloud does not know this offer's instance type or
/// does not sell it (in this region, or at all any more): the pool moves on to the next offer at
/// once, without trying the same type on demand.
class UnknownInstanceTypeError : public CapacityError {
public:
    using CapacityError::CapacityError;
};

/// Thrown by CloudAdapter::launch when the launch may have been carried out but its answer was
/// lost: none came (a timeout, a cut connection), it was cut short or is not the API's format,
/// or the cloud failed (a 5xx). The pool then looks for the machine by the pool's tag
/// (list(pool_id)) for up to CloudLogin::lost_launch_wait and uses it; where none appears, the
/// launch is sent once more, then the next offer is tried (a machine that shows later is
/// terminated). Any other exception ends provisioning: throw this one only where a machine may
/// exist.
class LaunchAnswerLostError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// What `sky ls` and `sky gc` need of a provider's machines, and the cloud layer of a pool's:
/// describe, end and list them by pool, delete and list what was made for a pool. Every method
/// may be called from several threads at once, and the methods that take a pool id must work
/// with nothing but that id (`sky gc` calls them from another process, long after the pool's
/// client is gone). Errors are exceptions whose messages never contain a credential.
class MachineInventory {
public:
    virtual ~MachineInventory() = default;

    /// The provider's name in offers, events and `sky ls` ("aws", "my-cloud").
    [[nodiscard]] virtual std::string name() const = 0;
    /// The region the pool runs in (InfraCreated, attempts); empty where the cloud places it.
    [[nodiscard]] virtual std::string region() const { return {}; }
    /// The machines with these ids, one entry per id; an id the cloud does not know is
    /// `unknown`.
    virtual std::vector<CloudInstance> describe(const std::vector<std::string>& ids) = 0;
    /// Asks the cloud to end these machines; an id that is already gone is success.
    virtual void terminate(const std::vector<std::string>& ids) = 0;
    /// The machines tagged with this pool id that are not gone; every sky machine of this
    /// account when `pool_id` is empty (`sky ls`, `sky gc`).
    virtual std::vector<CloudInstance> list(std::string_view pool_id) = 0;
    /// Deletes what was made for this pool besides its machines (CloudAdapter::create_infra).
    /// Best effort; never throws.
    virtual void delete_infra(std::string_view pool_id) noexcept { (void)pool_id; }
    /// What of this pool's infrastructure is still there (after delete_infra()), one line per
    /// thing, with why when known ("security group sg-0a1b (sky-1a2b3c4d): DependencyViolation:
    /// ..."); empty when nothing is. While it is not empty, teardown calls delete_infra() again
    /// with backoff for timings().infra_wait, then records what is left for `sky ls` and `sky
    /// gc`. Like delete_infra(), it must work from the pool id alone. Never throws. Default:
    /// nothing (delete_infra() is taken at its word).
    [[nodiscard]] virtual std::vector<std::string> infra_left(std::string_view pool_id) noexcept {
        (void)pool_id;
        return {};
    }
    /// How long teardown and a lost launch wait on this provider.
    [[nodiscard]] virtual CloudTimings timings() const { return {}; }
};

/// A cloud's REST mapping: its machine inventory, plus offers, the pool's infrastructure,
/// launching one machine, and how the client logs in to it.
class CloudAdapter : public MachineInventory {
public:
    /// Offers read from the cloud now (facts and prices). When the cloud answers with any, they
    /// are the pool's only candidates: an instance type the cloud did not list is never tried.
    /// The embedded catalog (`catalog`) still fills what an offer lacks (accelerator, sizes,
    /// prices) from its row with the same instance type. Empty: the cloud could not be asked (or
    /// has no such API), and the embedded catalog's rows are the candidates. Throw CapacityError
    /// when the cloud answered that nothing can be had now (no type available anywhere): the
    /// pool then fails with a ProvisionError saying so, and no catalog row is tried in the
    /// cloud's stead. `notify` takes warnings (ErrorEvent) for the program's event stream.
    /// Default: none, the catalog's own.
    [[nodiscard]] virtual std::vector<Offer> live_offers(const Catalog& catalog,
                                                         const SelectionRequest& request,
                                                         const std::function<void(Event)>& notify) {
        (void)catalog, (void)request, (void)notify;
        return {};
    }
    /// Creates what the pool's machines need before any launch (key pair, firewall). Called
    /// once per pool; must accept a second call after a partial failure.
    virtual void create_infra(const InfraRequest& request,
                              const std::function<void(Event)>& notify) {
        (void)request, (void)notify;
    }
    /// Launches one machine and returns its id as soon as the cloud names it. Throws
    /// CapacityError when the offer has no capacity now, UnknownInstanceTypeError when the cloud
    /// refuses its instance type as unknown or not sold there, LaunchAnswerLostError when the
    /// machine may exist but its id never came back.
    virtual std::string launch(const LaunchRequest& request) = 0;
    /// How the client logs in to the nodes, and the cloud's timings.
    [[nodiscard]] virtual CloudLogin login() const { return {}; }
    /// The timings of login(): an adapter sets them there.
    [[nodiscard]] CloudTimings timings() const override { return login(); }
};

SKY_PUBLIC_END
