#pragma once
// Keys a cloud pool makes on the client: the pool's SSH key (the client logs in with it) and one
// host key per node (the node's sshd serves it, the client pins it), and the boot script that
// installs a node's host key on its first boot. Every cloud adapter hands the same boot script to
// its machines (user data, startup script, onstart, container command), so the fakes share one
// parser for it too.
#include <chrono>
#include <filesystem>
#include <string>

namespace sky::detail {

/// An OpenSSH key pair as text.
struct SshKeyPair {
    std::string private_key;  ///< OpenSSH private key file contents
    std::string public_key;   ///< "ssh-ed25519 AAAA... comment" (trimmed)
};

/// Runs ssh-keygen (bounded, 30 s) to make an ed25519 key at `file` (and `file`.pub); its output
/// is discarded (it may echo key material). Throws ProvisionError naming what failed.
void ssh_keygen(const std::filesystem::path& file, const std::string& comment);

/// The public half of a key ssh_keygen() made ("ssh-ed25519 AAAA... comment").
std::string public_key_of(const std::filesystem::path& key_file);

/// A fresh host key; the private half exists only in the returned text (its file is removed).
SshKeyPair make_host_key(const std::filesystem::path& scratch_dir, const std::string& name);

/// What a node's first boot installs.
struct BootScriptOptions {
    std::string pool_id;
    SshKeyPair host_key;
    /// The pool's hard timeout: the machine powers itself off 10 minutes after it (a client that
    /// never reaches the node leaves nothing running for long).
    std::chrono::seconds hard_timeout{3600};
    /// Also authorize this client key for root (providers that do not install a key pair).
    std::string authorized_key;
    /// Arm the power-off timer and mark the machine so that its watchdog may power it off
    /// (CloudLogin::power_off_on_expiry; never on machines the user keeps).
    bool power_off = true;
};

/// The boot script: installs the pinned host key, makes sshd serve only it, arms the power-off
/// timer, marks the machine as a sky cloud node (the watchdog may power it off) and removes
/// itself. The host key sits in a here-document ending at `SKY_HOST_KEY` (the fakes read it
/// there), the client key in `sky_authorized_key`.
std::string boot_script(const BootScriptOptions& options);

}  // namespace sky::detail
