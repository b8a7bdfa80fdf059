#pragma once
// Volumes (api.md §12) on a node: S3 buckets mounted with s3fs (a FUSE client from Debian)
// during bootstrap, in a phase of its own, and unmounted at teardown. The node gets files in its
// pool's private run directory (0700): mount.sh and unmount.sh, which name no credential, and a
// 0600 credentials file per volume that mount.sh hands to that volume's s3fs through its
// environment (never a command line) and removes once every volume is mounted. The credentials
// are the volume's own or minted for the pool (scoped to its volumes, for its lifetime), never
// the keys that launch machines. mount.sh mounts only at a path no other user can move (every
// directory on it owned by root or the login user, none writable by others without the sticky
// bit), resolved once and kept; unmount.sh undoes only what mount.sh started, and only where
// /proc/self/mountinfo shows that s3fs mount at exactly that path. RemoteNode::stop, the node's
// watchdog and, should the client vanish before the worker starts, a guard mount.sh leaves
// behind all run it.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sky/pool.hpp"
#include "sky/volume.hpp"

namespace sky::detail::node {
class NodeShell;
}

namespace sky::detail {

/// "s3://bucket/prefix", how messages and errors name a volume.
[[nodiscard]] std::string volume_name(const Volume& volume);

/// PoolSpec::validate's checks of the volumes: one message per problem, each naming the volume.
/// Also refuses a plain-http endpoint to another machine (as every provider endpoint) unless
/// SKY_ALLOW_INSECURE_ENDPOINT=1.
void check_volumes(const std::vector<Volume>& volumes, std::vector<std::string>& problems);

/// Providers whose nodes are worker processes on this machine (Local, Simulated) do not mount:
/// a pool with volumes there is refused (ConfigError naming the volume) rather than run without
/// them. Appends that message when `provider_name` is such a provider and there are volumes.
void refuse_volumes_on_this_machine(const std::vector<Volume>& volumes,
                                    std::string_view provider_name,
                                    std::vector<std::string>& problems);

/// What one volume's s3fs on a node authenticates with.
struct VolumeCredentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;  ///< empty unless temporary (STS) credentials
};

/// The credentials sky mints volume credentials from: the pool's AWS credentials, resolved as
/// sky::AWS resolves them (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else
/// the shared credentials file with the AWS provider's profile, else AWS_PROFILE, else
/// "default"); nullopt when there are none. They never leave the client.
[[nodiscard]] std::optional<VolumeCredentials> minting_credentials(const PoolSpec& spec);

/// The session policy of minted credentials: for each volume, listing its bucket (under its
/// prefix) and reading the prefix's objects, and writing and deleting them unless read-only.
[[nodiscard]] std::string volume_policy(const std::vector<const S3Volume*>& volumes);

/// Each volume's credentials, in order: its own (S3Volume::access_key_id ...) where it has them;
/// for the others one set minted with STS GetFederationToken from minting_credentials(), scoped
/// by volume_policy() to those volumes and lasting the pool's timeout (plus ten minutes; STS
/// grants 15 minutes to 36 hours). The keys that launch the pool's machines never go to a node.
/// Throws VolumeFailure naming the volume when neither is possible.
[[nodiscard]] std::vector<VolumeCredentials> resolve_volume_credentials(const PoolSpec& spec,
                                                                        const std::string& pool_id);

/// The files that mount and unmount a pool's volumes on a node, all kept in `dir`.
struct VolumePlan {
    std::string mount_script;              ///< names no credential
    std::string unmount_script;            ///< idempotent; touches only what mount_script started
    std::vector<std::string> credentials;  ///< per volume, the 0600 file (shell assignments)
};

/// The plan for `volumes` in `dir` (an absolute path in the pool's private run directory), with
/// one set of credentials per volume.
[[nodiscard]] VolumePlan plan_volumes(const std::vector<Volume>& volumes, const std::string& dir,
                                      const std::vector<VolumeCredentials>& credentials);

/// The s3fs arguments for one volume (source, mount point, options): what mount_script runs.
[[nodiscard]] std::vector<std::string> s3fs_arguments(const S3Volume& volume);

/// Where a node keeps its volume files, inside the pool's run directory.
[[nodiscard]] std::string volumes_dir(const std::string& run_dir);

/// The node's unmount script (volumes_dir/unmount.sh) the volume phase leaves: the node's
/// launcher runs it when the node's life ends, and the bring-up's stop (`bash <it>`).
[[nodiscard]] std::string unmount_script_path(const std::string& run_dir);

/// Why the volume phase failed: the message names the volume (its bucket); the output is s3fs's
/// own words, with no credential in them.
class VolumeFailure : public std::runtime_error {
public:
    VolumeFailure(const std::string& message, std::vector<std::string> output)
        : std::runtime_error(message), output(std::move(output)) {}
    std::vector<std::string> output;
};

/// The volume phase on a node reached through `shell`: installs s3fs where it is missing, mounts
/// every volume of `spec` and waits (bounded) until each is really there. Throws VolumeFailure.
void mount_volumes(node::NodeShell& shell, const PoolSpec& spec, const std::string& pool_id,
                   const std::string& run_dir);

}  // namespace sky::detail
