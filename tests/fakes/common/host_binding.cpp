#include "fakes/common/host_binding.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "hosts/test_hosts.hpp"

namespace sky::test {

namespace {

// The text between "<<'MARK'\n" and "\nMARK" (a quoted heredoc), "" when absent.
std::string heredoc(std::string_view script, std::string_view mark) {
    const std::string open = "<<'" + std::string(mark) + "'\n";
    const std::string close = "\n" + std::string(mark);
    const auto b = script.find(open);
    if (b == std::string_view::npos) return {};
    const auto e = script.find(close, b + open.size());
    if (e == std::string_view::npos) return {};
    return std::string(script.substr(b + open.size(), e - b - open.size()));
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

BootScriptKeys parse_boot_script(std::string_view script) {
    BootScriptKeys k;
    k.host_private_key = heredoc(script, "SKY_HOST_KEY");
    k.host_public_key = heredoc(script, "SKY_HOST_PUB");
    // sky_authorized_key='<key>' (a single-quoted word: a key holds no quote)
    const std::string_view open = "\nsky_authorized_key='", close = "'\n";
    if (auto b = script.find(open); b != std::string_view::npos) {
        b += open.size();
        if (auto e = script.find(close, b); e != std::string_view::npos)
            k.authorized_key = std::string(script.substr(b, e - b));
    }
    return k;
}

HostBinding::HostBinding(TestHosts& hosts, bool install_host_key)
    : hosts_(hosts),
      install_host_key_(install_host_key),
      bound_(static_cast<std::size_t>(hosts.size())) {}

HostBinding::~HostBinding() {
    for (const auto& m : machines()) {
        try {
            release(m);
        } catch (const std::exception&) {
            // TestHosts' own teardown kills what is left.
        }
    }
}

std::optional<int> HostBinding::free_host() const {
    std::lock_guard lock(mutex_);
    for (std::size_t h = 0; h < bound_.size(); ++h)
        if (bound_[h].empty()) return static_cast<int>(h);
    return std::nullopt;
}

void HostBinding::boot(const std::string& machine, int host, std::string_view boot_script,
                       const std::string& authorized_key) {
    std::lock_guard lock(mutex_);
    boot_locked(machine, host, boot_script, authorized_key);
}

std::optional<int> HostBinding::boot_any(const std::string& machine, std::string_view boot_script,
                                         const std::string& authorized_key) {
    std::lock_guard lock(mutex_);
    for (std::size_t h = 0; h < bound_.size(); ++h) {
        if (!bound_[h].empty()) continue;
        boot_locked(machine, static_cast<int>(h), boot_script, authorized_key);
        return static_cast<int>(h);
    }
    return std::nullopt;
}

// Under mutex_: a host is booted by one request at a time (restart_sshd is not reentrant per
// host), and a boot takes a fraction of a second.
void HostBinding::boot_locked(const std::string& machine, int host, std::string_view boot_script,
                              const std::string& authorized_key) {
    if (machine.empty()) throw std::logic_error("host binding: a machine needs an id");
    std::string& slot = bound_.at(static_cast<std::size_t>(host));
    if (!slot.empty() && slot != machine)
        throw std::logic_error("host binding: host " + std::to_string(host) + " runs " + slot);
    const BootScriptKeys keys = parse_boot_script(boot_script);
    std::string host_key = install_host_key_ ? keys.host_private_key : "";
    if (host_key.empty())  // nothing installed: the host's own key (made by TestHosts)
        host_key = read_file(hosts_.dir() / ("host" + std::to_string(host) + "_ed25519"));
    std::string authorized = authorized_key;
    if (!keys.authorized_key.empty()) authorized += "\n" + keys.authorized_key;
    hosts_.restart_sshd(host, host_key, authorized);
    slot = machine;  // only a machine that booted holds the host
    play_host_firewall(host, boot_script);
}

// sky's host firewall (providers/cloud/host_firewall.hpp), where the boot script has one: run as
// the machine's boot runs it, in the host's network namespace, its state in the host's own /root
// (seen from here through host_path).
void HostBinding::play_host_firewall(int host, std::string_view boot_script) {
    const std::string_view begin = "# sky host firewall: begin\n",
                           end = "# sky host firewall: end\n";
    const auto b = boot_script.find(begin), e = boot_script.find(end);
    if (b == std::string_view::npos || e == std::string_view::npos || e < b) return;
    std::string part(boot_script.substr(b, e + end.size() - b));
    const std::string dir_line = "sky_fw_dir='/root/.sky/firewall'\n";
    const auto at = part.find(dir_line);
    if (at == std::string::npos)
        throw std::runtime_error("host binding: unknown firewall directory");
    part.replace(at, dir_line.size(),
                 "sky_fw_dir='" + hosts_.host_path(host, "/root/.sky/firewall").string() + "'\n");
    const auto file = hosts_.dir() / ("firewall-part-" + std::to_string(host) + ".sh");
    {
        std::ofstream f(file);
        f << part;
    }
    auto r = run_command({"ip", "netns", "exec", hosts_.netns(host), "bash", file.string()});
    if (r.status != 0)
        throw std::runtime_error("host binding: the host firewall failed: " + r.output);
}

// A released host's firewall goes with its machine.
void HostBinding::clear_host_firewall(int host) {
    (void)run_command(
        {"ip", "netns", "exec", hosts_.netns(host), "nft", "delete", "table", "inet", "sky"});
    for (const char* t : {"iptables", "ip6tables"})
        (void)run_command({"ip", "netns", "exec", hosts_.netns(host), "sh", "-c",
                           std::string(t) + " -D INPUT -j SKY-IN; " + t + " -F SKY-IN; " + t +
                               " -X SKY-IN; " + t + " -F SKY-PEERS; " + t + " -X SKY-PEERS"});
    std::error_code ec;
    std::filesystem::remove_all(hosts_.host_path(host, "/root/.sky/firewall"), ec);
}

void HostBinding::release(const std::string& machine) {
    std::lock_guard lock(mutex_);
    for (std::size_t h = 0; h < bound_.size(); ++h) {
        if (bound_[h] != machine || machine.empty()) continue;
        // The machine is gone: everything on it stops (sshd too, until it is booted again).
        hosts_.kill_all_processes(static_cast<int>(h));
        clear_host_firewall(static_cast<int>(h));
        bound_[h].clear();
    }
}

std::optional<int> HostBinding::host_of(const std::string& machine) const {
    std::lock_guard lock(mutex_);
    for (std::size_t h = 0; h < bound_.size(); ++h)
        if (!machine.empty() && bound_[h] == machine) return static_cast<int>(h);
    return std::nullopt;
}

std::vector<std::string> HostBinding::machines() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& m : bound_)
        if (!m.empty()) out.push_back(m);
    return out;
}

}  // namespace sky::test
