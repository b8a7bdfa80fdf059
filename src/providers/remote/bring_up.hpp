#pragma once
// Bringing one node up, written once over the node's shell (node/shell.hpp): check (the node's
// architecture and C library) -> ship (ship/shipment.hpp) -> bootstrap (the image's script, read
// by the one phase reader, node/marks.hpp) -> volumes -> launch -> connect -> exit reason -> stop.
// Every way of reaching a machine is a shell plus this: an SSH host or cloud instance (RemoteNode:
// an SshShell), a Slurm compute node (its srun shell; the job and the placement stay Slurm's), a
// Kubernetes pod (exec and port-forward).
//
// The worker runs under the launcher, a process mode of this program (`--sky-launch`,
// runtime/worker/launcher.hpp): the bring-up starts one argv through the shell, its settings
// and the token on stdin, and the launcher answers with the worker's port once it listens. The
// launcher is the node's one watchdog (idle and hard timeout, power-off, preemption probe).
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "node/shell.hpp"
#include "pool/backend.hpp"
#include "ship/shipment.hpp"
#include "sky/events.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// Starts the launcher's `argv` on the node with `stdin_data` and returns once it said where the
/// worker listens (or failed): its outcome, whose stdout holds the launcher's port mark line, or
/// its last words when the worker ended first. The default (an empty function) runs it through the
/// shell, where it detaches itself; a provider whose node processes must live in a job step of
/// their own (Slurm) starts it its own way and returns the launcher's first lines.
using LauncherStarter = std::function<node::CommandOutcome(const std::vector<std::string>& argv,
                                                           const std::string& stdin_data)>;

/// What the provider adds to a node's bring-up.
struct BringUpOptions {
    /// The node's id in events and errors (an instance id, "slurm-<job>-<node>", a pod name).
    std::string instance_id;
    /// The pool's shipment, shared by its nodes so that each file leaves the client once; null:
    /// this node ships on its own.
    std::shared_ptr<ship::PoolShipment> shipment;
    /// How the pool's other nodes reach this one (its program files are served to them from
    /// there); used only when `peer_transfers`.
    std::string peer_address;
    /// False where the node has no address of its own on a network only the pool shares: it
    /// neither serves program files to its peers nor fetches from them.
    bool peer_transfers = true;
    /// Non-empty: the provider placed the program there on the node already and checked the
    /// node's architecture and C library (Slurm's sbcast or shared home): check and ship are
    /// skipped.
    std::string program_dir;
    /// Nodes that share a home take turns at the image's bootstrap (a lock file beside the
    /// image's directory): one builds it, the others find it made.
    bool shared_home = false;
    /// Where the worker listens. Empty: a Unix socket in the node's private run directory (only
    /// this user and root reach it), opened with NodeShell::open_unix_socket. Otherwise this
    /// address of the node on any port, reached with NodeShell::open_channel(listen_host, port).
    std::string listen_host;
    /// The environment variable (on the node) whose value is the one address the worker accepts
    /// connections from (Slurm's SLURM_LAUNCH_NODE_IPADDR); empty: any.
    std::string allow_from_variable;
    /// At least this long for the client's first connection (a channel through a login node
    /// comes later than one over the node's own session); the pool's idle_timeout otherwise.
    std::chrono::seconds min_accept_timeout{0};
    /// Cloud instances: when the idle or hard timeout ends the worker, the launcher powers the
    /// machine off (only where the instance's launch data left /etc/sky/power-off-on-expiry).
    /// Never for machines the user owns.
    bool power_off_on_expiry = false;
    /// An argv the launcher runs on the node every 3 s (so that the pool hears of a notice
    /// within 5 s); exit status 0 is the provider's notice that it takes the machine back, its
    /// output as LaunchSettings::probe says (a deadline, or a softer warning). The notice goes
    /// to the client on the worker's own stream (a PreemptionNotice, api.md §10a); the worker
    /// goes on until the deadline, then the launcher ends it and leaves a `preempted` file, so
    /// exit_reason() says preempted. Empty: none.
    std::vector<std::string> preemption_probe;
    /// A signal the batch system sends the node's step ahead of its end (Slurm's --signal): a
    /// notice on the same channel, with its deadline `notice_lead` after the signal came. 0:
    /// none.
    int notice_signal = 0;
    std::chrono::seconds notice_lead{0};
    std::string notice_reason;  ///< that notice's words
    /// An argv the launcher runs when its worker ended because the client was silent for
    /// idle_timeout, unless a newer launcher of the same node took its place within
    /// `superseded_grace` (Slurm: scancel the job, which no client holds any more). Empty: none.
    std::vector<std::string> release_on_idle;
    std::chrono::seconds superseded_grace{30};
    /// How the launcher starts (see LauncherStarter); empty: through the shell, detached.
    LauncherStarter start_launcher;
    /// Each launch's worker files in a directory of its own (run_dir()/<launch number>), which
    /// its launcher removes when its worker ends: a launcher that outlives its worker (waiting
    /// to learn whether it was superseded) never meets the next one's files. False: the worker
    /// files are in run_dir(), kept after a crash for exit_reason().
    bool worker_dir_per_launch = false;
    /// The worker's stream crosses a network sky does not otherwise encrypt (Slurm's cluster
    /// network): it is sealed (io/sealed.hpp), only public keys cross the launcher's stdin and
    /// output (each end derives the token from them), and the pool's environment travels in the
    /// sealed hello (NodeStart::env), not in the launcher's settings.
    bool seal = false;
};

/// One node's bring-up over its shell. The shell outlives it. Each step throws BootstrapError
/// naming the phase that failed (the shell's own error when the node cannot be reached). Safe
/// to use from one thread at a time.
class NodeBringUp {
public:
    NodeBringUp(node::NodeShell& shell, const PoolSpec& spec, std::string pool_id, int node,
                BringUpOptions options);
    ~NodeBringUp();
    NodeBringUp(const NodeBringUp&) = delete;
    NodeBringUp& operator=(const NodeBringUp&) = delete;

    /// Checks the node (architecture, C library, $HOME) unless BringUpOptions::program_dir
    /// says the provider did. Emits BootstrapProgress "check".
    void check(const std::function<void(Event)>& emit);
    /// This pool's private directories on the node, then the program (content-addressed, each
    /// missing file sent once per pool) unless the provider placed it. Emits the shipment's
    /// progress.
    void ship(const std::function<void(Event)>& emit);
    /// The image's bootstrap script, phase by phase (one BootstrapProgress per phase), then the
    /// pool's volumes. Throws BootstrapError naming the phase that failed and its last lines.
    void bootstrap(const std::function<void(Event)>& emit);
    /// check(), ship() and bootstrap() in order.
    void prepare(const std::function<void(Event)>& emit);

    /// Starts a worker under the launcher (a fresh token; a worker this bring-up launched
    /// before is ended first) and returns once it listens. Emits BootstrapProgress "worker".
    void launch(const std::function<void(Event)>& emit);
    /// A new stream to the worker, within `timeout`. Throws WorkerGone when the node answers
    /// that nothing listens there, another error when the node cannot be reached.
    std::unique_ptr<io::Stream> connect(std::chrono::milliseconds timeout);
    /// Why the worker ended (the launcher's exit and crash files, its preempted mark).
    NodeExit exit_reason();
    /// Ends the launcher and its worker, unmounts the volumes and removes this pool's files
    /// from the node (the content-addressed program store stays). Never throws.
    void stop() noexcept;

    /// The token the worker expects (after launch()).
    [[nodiscard]] const std::string& token() const noexcept { return token_; }
    /// $HOME on the node (after check()).
    [[nodiscard]] const std::string& home() const noexcept { return home_; }
    /// This pool's private directory for this node (after ship()).
    [[nodiscard]] const std::string& run_dir() const noexcept { return run_dir_; }
    /// The program's directory on the node (after ship()).
    [[nodiscard]] const std::string& program_dir() const noexcept { return prog_dir_; }
    /// The directory of the last launch's worker files (after launch()).
    [[nodiscard]] const std::string& worker_dir() const noexcept { return worker_dir_; }
    /// The port the worker listens on (0: a Unix socket, or not launched).
    [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
    /// The node's shell.
    [[nodiscard]] node::NodeShell& shell() const noexcept { return shell_; }

private:
    [[noreturn]] void fail(const std::string& phase, const std::string& message,
                           std::vector<std::string> output = {}) const;
    [[nodiscard]] std::string launcher_settings() const;
    [[nodiscard]] std::vector<std::string> launcher(std::string_view command) const;

    node::NodeShell& shell_;
    PoolSpec spec_;
    std::string pool_id_;
    int node_ = 0;
    BringUpOptions o_;
    std::string home_;
    std::string image_home_;
    std::string run_dir_;
    std::string prog_dir_;
    std::string exe_path_;
    std::string worker_dir_;
    int launches_ = 0;
    std::string socket_path_;
    std::string token_;
    std::uint16_t port_ = 0;
    bool shipped_ = false;   // this node may serve files to its peers
    bool launched_ = false;  // a launcher was started (stop() ends it)
};

}  // namespace sky::detail
