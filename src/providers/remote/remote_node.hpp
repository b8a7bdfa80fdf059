#pragma once
// A node reached over SSH (an sky::SSH host, a cloud instance): the node's bring-up
// (providers/remote/bring_up.hpp) over an SSH shell (node/ssh_shell.hpp). Its worker listens on
// a Unix socket in the pool's private directory on the node, under the launcher that watches it,
// and its connection is a channel of the same SSH session.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "node/ssh_shell.hpp"
#include "pool/backend.hpp"
#include "providers/remote/bring_up.hpp"
#include "ship/shipment.hpp"
#include "ssh/session.hpp"

namespace sky::detail {

struct RemoteNodeSpec {
    std::string host;  ///< address the client connects to
    std::uint16_t port = 22;
    std::string user = "root";
    std::filesystem::path private_key_file;
    ssh::HostKeyPin host_key;
    /// Cloud instances: the node's launcher also powers the machine off when the client is gone
    /// (the provider terminates it on shutdown). Never for sky::SSH hosts, which the user owns.
    bool power_off_on_expiry = false;
    /// A shell command (bash) the launcher runs every 5 s; exit status 0 means the provider is
    /// taking the machine back (a spot reclaim). The launcher then ends the worker and leaves a
    /// `preempted` mark, so the node is reported lost as preempted. Empty: none.
    std::string preemption_probe;
    std::chrono::milliseconds connect_timeout{15000};
    int connect_attempts = 5;
    /// The pool's shipment, shared by its nodes so that each file leaves the client once.
    /// Null: this node ships on its own.
    std::shared_ptr<ship::PoolShipment> shipment;
    /// How the pool's other nodes reach this one (a private address); empty: `host`.
    std::string peer_address;
    /// False where the node has no address of its own on a network only the pool shares (a
    /// container behind a shared host address, a public address): it neither serves program
    /// files to its peers nor fetches from them, so no transfer token goes to whoever listens
    /// at a shared address; the client sends it what it lacks.
    bool peer_transfers = true;
    /// The node's boot script set up sky's host firewall (providers/cloud/host_firewall.hpp):
    /// before anything else the node admits `pool_addresses` (every node of the pool) through
    /// it; a node where that fails is still started, with an ErrorEvent saying it is open.
    bool host_firewall = false;
    std::vector<std::string> pool_addresses;
};

/// Where sky's host firewall keeps its admit command (`admit-peers`) and kind on a node.
inline constexpr const char* kHostFirewallDir = "/root/.sky/firewall";

class RemoteNode final : public NodeHandle {
public:
    /// Connects, ships, bootstraps and starts the worker; emits BootstrapStarting, one
    /// BootstrapProgress per phase and BootstrapCompleted. Throws BootstrapError naming the
    /// phase (or an ssh::SshError when the node cannot be reached).
    static std::unique_ptr<RemoteNode> start(const RemoteNodeSpec& where, const PoolSpec& spec,
                                             const std::string& pool_id, int node,
                                             const std::string& instance_id,
                                             const std::function<void(Event)>& emit);
    ~RemoteNode() override;

    /// A new transport to the worker (an SSH direct-streamlocal channel to its Unix socket).
    std::unique_ptr<io::Stream> connect_worker() override;
    [[nodiscard]] const std::string& token() const noexcept override { return up_->token(); }
    /// The worker waits for its client after a dropped connection (ClientHello::session).
    [[nodiscard]] bool can_reconnect() const override { return true; }
    /// A new channel to the worker's socket over the node's session, or over a new session
    /// when that one is dead (one connect attempt within `within`). Throws WorkerGone when
    /// sshd answers but nothing listens at the socket.
    std::unique_ptr<io::Stream> reconnect_worker(std::chrono::milliseconds within) override;
    /// Admits these addresses (a node that joined the pool) through the node's host firewall
    /// (RemoteNodeSpec::host_firewall), after forgetting `forget` (the addresses of a node that
    /// left it: a cloud may give them to another customer). Returns what went wrong, empty
    /// when it is done.
    std::string admit_peers(const std::vector<std::string>& addresses,
                            const std::vector<std::string>& forget = {});
    /// Starts a fresh worker after the last one ended (the upload and bootstrap stay).
    void restart_worker(const std::function<void(Event)>& emit) override;
    /// Why the worker's connection ended.
    NodeExit exit_reason() override;
    [[nodiscard]] bool reachable() const override;
    /// Stops the launcher and its worker and removes this pool's files from the node (the
    /// content-addressed program cache stays for the next pool). Never throws.
    void stop() noexcept override;

private:
    RemoteNode() = default;
    /// How to reach the node (its host, key and host key pin).
    [[nodiscard]] ssh::SessionOptions session_options() const;

    RemoteNodeSpec where_;
    std::unique_ptr<node::SshShell> shell_;
    std::unique_ptr<NodeBringUp> up_;  // over shell_
};

}  // namespace sky::detail
