#include "providers/cloud/node_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "sky/errors.hpp"
#include "util/file.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace sky::detail {

void ssh_keygen(const std::filesystem::path& file, const std::string& comment) {
    std::error_code ec;
    std::filesystem::remove(file, ec);
    std::filesystem::remove(file.string() + ".pub", ec);
    // Its output says nothing a caller could act on but the reason for a failure.
    const auto r = run_subprocess(
        {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", file.string()}, {},
        std::chrono::seconds(30), 64u << 10);
    if (r.status < 0 && !r.timed_out)
        throw ProvisionError("cannot run ssh-keygen (install openssh-client) to make SSH keys");
    if (r.status != 0 || !std::filesystem::exists(file.string() + ".pub")) {
        const auto why = trim(r.timed_out ? std::string_view("it ran past 30 s") : r.errors);
        throw ProvisionError(fmt::format("ssh-keygen failed to make an ed25519 key{}{}",
                                         why.empty() ? "" : ": ", why));
    }
}

std::string public_key_of(const std::filesystem::path& key_file) {
    return std::string(trim(read_file(key_file.string() + ".pub").value_or("")));
}

SshKeyPair make_host_key(const std::filesystem::path& scratch_dir, const std::string& name) {
    auto key = scratch_dir / name;
    ssh_keygen(key, "sky-host");
    SshKeyPair k{read_file(key).value_or(""), public_key_of(key)};
    std::error_code ec;
    std::filesystem::remove(key, ec);  // the private half lives only in the boot script
    std::filesystem::remove(key.string() + ".pub", ec);
    return k;
}

std::string boot_script(const BootScriptOptions& o) {
    const long minutes =
        std::max<long>(5, static_cast<long>((o.hard_timeout.count() + 59) / 60) + 10);
    std::string power_off;
    if (o.power_off)
        power_off = fmt::format(
            "shutdown -h +{} 'sky: pool hard timeout' 2>/dev/null || true\n"
            "# The node's watchdog may power this machine off only where this marker exists.\n"
            "mkdir -p /etc/sky && touch /etc/sky/power-off-on-expiry\n",
            minutes);
    std::string authorize;
    if (!o.authorized_key.empty())
        authorize = fmt::format(
            "mkdir -p /root/.ssh && chmod 700 /root/.ssh\n"
            "grep -qxF '{key}' /root/.ssh/authorized_keys 2>/dev/null || "
            "printf '%s\\n' '{key}' >> /root/.ssh/authorized_keys\n"
            "chmod 600 /root/.ssh/authorized_keys\n",
            fmt::arg("key", std::string(trim(o.authorized_key))));
    return fmt::format(
        "#!/bin/bash\n"
        "# sky pool {pool}: host key pinned by the client; SSH only.\n"
        "set -u\n"
        "umask 077\n"
        "cat > /etc/ssh/ssh_host_ed25519_key <<'SKY_HOST_KEY'\n"
        "{priv}\n"
        "SKY_HOST_KEY\n"
        "cat > /etc/ssh/ssh_host_ed25519_key.pub <<'SKY_HOST_PUB'\n"
        "{pub}\n"
        "SKY_HOST_PUB\n"
        "chmod 600 /etc/ssh/ssh_host_ed25519_key\n"
        "chmod 644 /etc/ssh/ssh_host_ed25519_key.pub\n"
        "{authorize}"
        "mkdir -p /etc/ssh/sshd_config.d\n"
        "printf 'HostKey /etc/ssh/ssh_host_ed25519_key\\n' > "
        "/etc/ssh/sshd_config.d/00-sky-hostkey.conf\n"
        "systemctl restart ssh 2>/dev/null || systemctl restart sshd 2>/dev/null || "
        "service ssh restart\n"
        "{power_off}"
        "# This script holds the host key; the client replaces that key after its first\n"
        "# connection. Drop this copy of it now (cloud-init's own copies go then).\n"
        "rm -f -- \"$0\" 2>/dev/null || true\n",
        fmt::arg("pool", o.pool_id), fmt::arg("priv", std::string(trim(o.host_key.private_key))),
        fmt::arg("pub", std::string(trim(o.host_key.public_key))), fmt::arg("authorize", authorize),
        fmt::arg("power_off", power_off));
}

}  // namespace sky::detail
