#include "fakes/common/host_binding.hpp"

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
    // printf '%s\n' '<key>' >> /root/.ssh/authorized_keys
    const std::string_view open = "printf '%s\\n' '", close = "' >> /root/.ssh/authorized_keys";
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
}

void HostBinding::release(const std::string& machine) {
    std::lock_guard lock(mutex_);
    for (std::size_t h = 0; h < bound_.size(); ++h) {
        if (bound_[h] != machine || machine.empty()) continue;
        // The machine is gone: everything on it stops (sshd too, until it is booted again).
        hosts_.kill_all_processes(static_cast<int>(h));
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
