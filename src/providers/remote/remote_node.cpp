#include "providers/remote/remote_node.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "pool/backend.hpp"
#include "providers/remote/scripts.hpp"
#include "ssh/session.hpp"

namespace sky::detail {

ssh::SessionOptions RemoteNode::session_options() const {
    ssh::SessionOptions o;
    o.host = where_.host;
    o.port = where_.port;
    o.user = where_.user;
    o.private_key_file = where_.private_key_file;
    o.host_key = where_.host_key;
    o.connect_timeout = where_.connect_timeout;
    o.connect_attempts = where_.connect_attempts;
    return o;
}

std::unique_ptr<RemoteNode> RemoteNode::start(const RemoteNodeSpec& where, const PoolSpec& spec,
                                              const std::string& pool_id, int node,
                                              const std::string& instance_id,
                                              const std::function<void(Event)>& emit) {
    std::unique_ptr<RemoteNode> n(new RemoteNode());
    n->where_ = where;
    n->shell_ = std::make_unique<node::SshShell>(n->session_options());
    BringUpOptions o;
    o.instance_id = instance_id;
    o.shipment = where.shipment;
    o.peer_address = where.peer_address.empty() ? where.host : where.peer_address;
    o.peer_transfers = where.peer_transfers;
    o.power_off_on_expiry = where.power_off_on_expiry;
    if (!where.preemption_probe.empty())
        o.preemption_probe = {"bash", "-c", where.preemption_probe};
    n->up_ = std::make_unique<NodeBringUp>(*n->shell_, spec, pool_id, node, std::move(o));
    auto& up = *n->up_;
    emit(BootstrapStarting{instance_id});
    up.check(emit);
    // A cloud without a firewall API: the pool's nodes are admitted through the host firewall
    // the boot script set up, before anything of the pool listens here.
    if (where.host_firewall) {
        const std::string why = n->admit_peers(where.pool_addresses);
        if (!why.empty())
            emit(ErrorEvent{fmt::format("node {} ({}) has no working host firewall ({}): every "
                                        "port the pool opens there is reachable by anyone who "
                                        "can reach {}",
                                        node, instance_id, why, where.host),
                            instance_id});
    }
    up.ship(emit);
    up.bootstrap(emit);
    up.launch(emit);
    emit(BootstrapCompleted{instance_id});
    return n;
}

std::string RemoteNode::admit_peers(const std::vector<std::string>& addresses,
                                    const std::vector<std::string>& forget) {
    std::vector<std::string> argv{"bash", "-c", std::string(scripts::admit_peers_sh()),
                                  "sky-admit-peers", kHostFirewallDir};
    // Forgotten first: an address the node that left and the one that joined share stays in.
    for (const auto& a : forget)
        if (!a.empty()) argv.push_back("-" + a);
    for (const auto& a : addresses)
        if (!a.empty()) argv.push_back(a);
    try {
        auto r = shell_->run(argv, std::chrono::seconds(30));
        std::string kind = r.out.substr(0, r.out.find('\n'));
        if (kind == "absent") return "the boot script set none up";
        if (kind == "none") return "the image has neither nftables nor iptables";
        if (r.status != 0)
            return fmt::format("admitting the pool's nodes failed ({})", r.summary());
        return {};
    } catch (const std::exception& e) {
        return e.what();
    }
}

std::unique_ptr<io::Stream> RemoteNode::connect_worker() {
    // A direct-streamlocal channel on the node's session, read and written on the I/O core.
    if (!shell_->alive())
        throw ssh::ConnectionLost("the SSH connection to " + where_.host + " was closed");
    return up_->connect(std::chrono::seconds(30));
}

std::unique_ptr<io::Stream> RemoteNode::reconnect_worker(std::chrono::milliseconds within) {
    using std::chrono::milliseconds;
    const auto deadline = std::chrono::steady_clock::now() + within;
    const auto left = [&] {
        return std::max(milliseconds(500), std::chrono::duration_cast<milliseconds>(
                                               deadline - std::chrono::steady_clock::now()));
    };
    // A live session answers a channel request within a round trip; one that does not within
    // 2 s is as dead as a closed one (a half-open connection). A refused channel while the
    // session lives means nobody listens at the worker's socket (WorkerGone).
    if (shell_->alive()) {
        const auto connection = shell_->connection();
        try {
            return up_->connect(std::min(left(), milliseconds(2000)));
        } catch (const WorkerGone&) {
            throw;
        } catch (const std::exception&) {
            shell_->drop(connection);  // then exit_reason() does not wait on it either
        }
    }
    // A new session, one attempt within what is left (the pool paces the attempts). It
    // replaces the dead one only once it is connected: until then exit_reason() sees the
    // dead one and answers at once.
    shell_->reconnect(left());
    if (!shell_->alive())
        throw ssh::ConnectionLost("the SSH connection to " + where_.host + " was closed");
    return up_->connect(std::min(left(), milliseconds(2000)));
}

void RemoteNode::restart_worker(const std::function<void(Event)>& emit) {
    // The launcher before it ends first; the upload and bootstrap stay.
    up_->launch(emit);
}

NodeExit RemoteNode::exit_reason() {
    if (!shell_ || !shell_->alive())
        return {NodeLostError::Reason::unreachable,
                fmt::format("the SSH connection to {} was lost", where_.host)};
    return up_->exit_reason();
}

bool RemoteNode::reachable() const { return shell_ && shell_->alive(); }

void RemoteNode::stop() noexcept {
    if (!shell_) return;
    if (up_) up_->stop();
    try {
        shell_->close();
    } catch (...) {
    }
}

RemoteNode::~RemoteNode() { stop(); }

}  // namespace sky::detail
