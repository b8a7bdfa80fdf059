#include "providers/slurm/login.hpp"

#include <pwd.h>
#include <unistd.h>

#include "node/local_shell.hpp"
#include "node/ssh_shell.hpp"
#include "providers/slurm/slurm_commands.hpp"
#include "ship/closure.hpp"
#include "ship/shipment.hpp"
#include "ssh/session.hpp"
#include "util/env.hpp"

namespace sky::detail::slurm {

namespace {

std::string local_user() {
    if (const passwd* p = ::getpwuid(::geteuid())) return p->pw_name;
    return env_or("USER", "root");
}

}  // namespace

std::unique_ptr<node::NodeShell> open_login(const LoginOptions& o) {
    if (o.login.empty()) return std::make_unique<node::LocalShell>();
    const LoginAddress a = parse_login(o.login);
    ssh::SessionOptions so;
    so.host = a.host;
    so.port = static_cast<std::uint16_t>(a.port);
    so.user = a.user.empty() ? local_user() : a.user;
    so.private_key_file = o.identity_file.empty() ? home_path(".ssh/id_ed25519") : o.identity_file;
    so.host_key = ssh::HostKeyPin::known_hosts(o.known_hosts.empty() ? home_path(".ssh/known_hosts")
                                                                     : o.known_hosts);
    so.connect_timeout = o.connect_timeout;
    so.connect_attempts = o.connect_attempts;
    auto shell = std::make_unique<node::SshShell>(so);
    (void)shell->home();  // learned now: a login node that cannot say it is refused here
    return shell;
}

std::string ship_program(node::NodeShell& login, const std::string& event_id,
                         const std::string& run_dir, const std::function<void(Event)>& emit) {
    ship::PoolShipment shipment(ship::this_program());
    ship::NodeSite site;
    site.node = 0;
    site.instance_id = event_id;
    site.shell = &login;
    site.home = login.home();
    site.run_dir = run_dir;
    // The login node's store serves no peer: the compute nodes get the program from it by
    // sbcast or a shared home.
    site.peers = false;
    std::string dir = shipment.ship(site, emit);
    shipment.forget(0);
    return dir;
}

}  // namespace sky::detail::slurm
