#include "providers/cloud/node_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "node/scripts.hpp"
#include "providers/cloud/scripts.hpp"
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
        o.power_off ? std::max<long>(5, static_cast<long>((o.hard_timeout.count() + 59) / 60) + 10)
                    : 0;
    scripts::ScriptValues v(
        fmt::format("sky pool {}: host key pinned by the client; SSH only.", o.pool_id));
    v.text("sky_host_key", trim(o.host_key.private_key), "SKY_HOST_KEY")
        .text("sky_host_pub", trim(o.host_key.public_key), "SKY_HOST_PUB")
        .word("sky_authorized_key", trim(o.authorized_key))
        .number("sky_power_off_minutes", minutes);
    return v.then({scripts::boot_sh()});
}

}  // namespace sky::detail
