#pragma once
/// \file The machine side of every provider fake: fake machines bound to SSH test hosts
/// (tests/hosts/test_hosts.hpp). Booting a machine plays what the cloud does on a first boot with
/// sky's boot script: the host's sshd restarts with the script's pinned host key and the client's
/// key authorized for root; releasing it kills everything on the host, as a terminated machine
/// stops. The script itself never runs here (the hosts share this machine's /etc and /usr, and
/// it arms a power-off timer): only its keys are read, and its host firewall part (where it has
/// one, providers/cloud/host_firewall.hpp) runs in the host's network namespace.
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sky::test {

class TestHosts;

/// What a sky boot script installs (src/providers/cloud/node_keys.cpp, boot_script()).
struct BootScriptKeys {
    std::string host_private_key;  ///< between the SKY_HOST_KEY heredoc markers; "" when none
    std::string host_public_key;   ///< between the SKY_HOST_PUB markers; "" when none
    std::string authorized_key;    ///< the key it authorizes for root itself; "" when none
};

/// Reads the keys out of a sky boot script.
BootScriptKeys parse_boot_script(std::string_view script);

/// Fake machines (by id) bound to test hosts, at most one machine per host. Thread-safe.
class HostBinding {
public:
    /// `install_host_key` false: booted hosts keep their own host key, as a machine whose boot
    /// script did not run (or a man in the middle): the client's pin must refuse it.
    explicit HostBinding(TestHosts& hosts, bool install_host_key = true);
    /// Releases every machine still bound (nothing keeps running on a host after the fake).
    ~HostBinding();
    HostBinding(const HostBinding&) = delete;
    HostBinding& operator=(const HostBinding&) = delete;

    /// The lowest host no machine is bound to; none when every host is bound.
    [[nodiscard]] std::optional<int> free_host() const;
    /// Binds `machine` to `host` and plays its first boot there: everything on the host is
    /// killed, then its sshd serves the boot script's host key (its own key when the script
    /// carries none) and authorizes `authorized_key` plus the key the script authorizes.
    /// Throws std::logic_error when the host is bound to another machine.
    void boot(const std::string& machine, int host, std::string_view boot_script,
              const std::string& authorized_key);
    /// Binds `machine` to the lowest free host and boots it; the host, or none when every host
    /// is bound (the cloud has no capacity).
    std::optional<int> boot_any(const std::string& machine, std::string_view boot_script,
                                const std::string& authorized_key);
    /// The machine is gone: everything on its host is killed and the host is free. An unknown
    /// machine is nothing to do.
    void release(const std::string& machine);

    /// The host a machine is bound to; none when unbound.
    [[nodiscard]] std::optional<int> host_of(const std::string& machine) const;
    /// Bound machines, by host order.
    [[nodiscard]] std::vector<std::string> machines() const;
    [[nodiscard]] TestHosts& hosts() const { return hosts_; }

private:
    void boot_locked(const std::string& machine, int host, std::string_view boot_script,
                     const std::string& authorized_key);
    void play_host_firewall(int host, std::string_view boot_script);
    void clear_host_firewall(int host);
    TestHosts& hosts_;
    bool install_host_key_;
    mutable std::mutex mutex_;
    std::vector<std::string> bound_;  // by host: the machine's id, "" when free
};

}  // namespace sky::test
