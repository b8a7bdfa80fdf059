#include "providers/cloud/node_keys.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "sky/errors.hpp"
#include "util/text.hpp"

extern char** environ;

namespace sky::detail {

namespace {

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

void ssh_keygen(const std::filesystem::path& file, const std::string& comment) {
    std::error_code ec;
    std::filesystem::remove(file, ec);
    std::filesystem::remove(file.string() + ".pub", ec);
    std::vector<std::string> argv{"ssh-keygen", "-q", "-t",    "ed25519", "-N",
                                  "",           "-C", comment, "-f",      file.string()};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    int rc = ::posix_spawnp(&pid, "ssh-keygen", &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        throw ProvisionError("cannot run ssh-keygen (install openssh-client) to make SSH keys");
    int status = 0;
    bool done = false;
    for (int i = 0; i < 3000 && !done; ++i) {  // 30 s at most
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) done = true;
        if (w < 0) break;
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!done) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
    }
    if (!done || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        !std::filesystem::exists(file.string() + ".pub"))
        throw ProvisionError("ssh-keygen failed to make an ed25519 key");
}

std::string public_key_of(const std::filesystem::path& key_file) {
    return std::string(trim(read_text(key_file.string() + ".pub")));
}

SshKeyPair make_host_key(const std::filesystem::path& scratch_dir, const std::string& name) {
    auto key = scratch_dir / name;
    ssh_keygen(key, "sky-host");
    SshKeyPair k{read_text(key), std::string(trim(read_text(key.string() + ".pub")))};
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
