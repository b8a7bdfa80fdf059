// Volumes on a node: the checks, the credentials, the mount and unmount scripts, the phase.
#include "volumes/volumes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "aws/ec2_client.hpp"
#include "aws/sts.hpp"
#include "http/endpoint.hpp"
#include "runtime/node_marks.hpp"
#include "node/scripts.hpp"
#include "node/shell.hpp"
#include "sky/errors.hpp"
#include "util/shell.hpp"
#include "volumes/scripts.hpp"

namespace sky::detail {

namespace {

// The prefix as s3fs's "bucket:/path" wants it: no leading or trailing slash.
std::string trimmed_prefix(const std::string& prefix) {
    std::size_t b = prefix.find_first_not_of('/');
    if (b == std::string::npos) return {};
    std::size_t e = prefix.find_last_not_of('/');
    return prefix.substr(b, e - b + 1);
}

bool has_control_char(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return true;
    return false;
}

// How many seconds mount.sh waits for one mount to appear.
constexpr int kMountWaitSeconds = 60;

}  // namespace

std::string volume_name(const Volume& volume) {
    const auto& s3 = std::get<S3Volume>(volume);
    const std::string p = trimmed_prefix(s3.prefix);
    return "s3://" + s3.bucket + (p.empty() ? "" : "/" + p);
}

void check_volumes(const std::vector<Volume>& volumes, std::vector<std::string>& problems) {
    // What any S3 bucket name may hold (old us-east-1 buckets also have capitals and '_'); the
    // service itself judges the rest, and a refusal fails the volume phase naming the bucket.
    static const std::regex bucket(R"([A-Za-z0-9][A-Za-z0-9._\-]{0,254})");
    static const std::regex region(R"([a-z0-9][a-z0-9\-]*)");
    std::vector<std::string> paths;
    for (const auto& vol : volumes) {
        const auto& s3 = std::get<S3Volume>(vol);
        const std::string at =
            fmt::format("volumes: {} at \"{}\": ", volume_name(vol), s3.mount_path);
        if (s3.mount_path.empty() || s3.mount_path[0] != '/')
            problems.push_back(
                fmt::format("{}mount_path must be absolute, got \"{}\"", at, s3.mount_path));
        else if (s3.mount_path.find_first_not_of('/') == std::string::npos ||
                 has_control_char(s3.mount_path) ||
                 s3.mount_path.find("/../") != std::string::npos ||
                 s3.mount_path.find("/./") != std::string::npos || s3.mount_path.ends_with("/..") ||
                 s3.mount_path.ends_with("/."))
            problems.push_back(fmt::format(
                "{}mount_path must name a directory below / (no \".\", \"..\" or control "
                "characters)",
                at));
        if (s3.bucket.empty())
            problems.push_back("volumes: an S3Volume needs a bucket");
        else if (!std::regex_match(s3.bucket, bucket))
            problems.push_back(fmt::format(
                "volumes: \"{}\" is not an S3 bucket name (letters, digits, '.', '-', '_')",
                s3.bucket));
        if (has_control_char(s3.prefix))
            problems.push_back(fmt::format("{}prefix has a control character", at));
        if (s3.access_key_id.empty() != s3.secret_access_key.empty() ||
            (!s3.session_token.empty() && s3.access_key_id.empty()))
            problems.push_back(fmt::format(
                "{}its own credentials need both access_key_id and secret_access_key", at));
        if (has_control_char(s3.access_key_id) || has_control_char(s3.secret_access_key) ||
            has_control_char(s3.session_token))
            problems.push_back(fmt::format("{}its credentials have a control character", at));
        if (!s3.region.empty() && !std::regex_match(s3.region, region))
            problems.push_back(fmt::format("{}\"{}\" is not a region name", at, s3.region));
        if (!s3.endpoint.empty()) {
            try {
                check_endpoint_security(
                    s3.endpoint,
                    {.provider = "S3Volume",
                     .source = fmt::format("the endpoint of volume {}", volume_name(vol)),
                     .secrets = "the access key id, the session token",
                     .payload = "the volume's files"});
            } catch (const ConfigError& e) {
                problems.push_back(fmt::format("{}{}", at, e.what()));
            }
            if (has_control_char(s3.endpoint))
                problems.push_back(fmt::format("{}the endpoint has a control character", at));
            // s3fs takes it as "-o url=<endpoint>", and FUSE splits options at commas: one in
            // the endpoint would add options of its own (allow_other, ...).
            if (s3.endpoint.find(',') != std::string::npos)
                problems.push_back(fmt::format("{}the endpoint has a comma", at));
        }
        std::string path = s3.mount_path;
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        for (const auto& p : paths)
            if (p == path || path.starts_with(p + "/") || p.starts_with(path + "/"))
                problems.push_back(fmt::format(
                    "{}two volumes cannot be mounted at {} and {} (one inside the other)", at, p,
                    path));
        paths.push_back(path);
    }
}

void refuse_volumes_on_this_machine(const std::vector<Volume>& volumes,
                                    std::string_view provider_name,
                                    std::vector<std::string>& problems) {
    if (volumes.empty()) return;
    const auto& s3 = std::get<S3Volume>(volumes.front());
    problems.push_back(fmt::format(
        "volumes: {} runs its nodes as processes on this machine and does not mount volumes: "
        "{} at {} would not be there (use sky::SSH or a cloud, or mount it on this machine "
        "yourself and drop it from the pool)",
        provider_name, volume_name(volumes.front()), s3.mount_path));
}

std::optional<VolumeCredentials> minting_credentials(const PoolSpec& spec) {
    std::string profile;
    if (const auto* a = spec.provider.get<AWS>()) profile = a->profile;
    auto c = aws::load_default_credentials(profile);
    if (!c) return std::nullopt;
    return VolumeCredentials{c->access_key_id, c->secret_access_key, c->session_token};
}

std::string volume_policy(const std::vector<const S3Volume*>& volumes) {
    nlohmann::json statements = nlohmann::json::array();
    for (const S3Volume* v : volumes) {
        const std::string p = trimmed_prefix(v->prefix);
        const std::string bucket = "arn:aws:s3:::" + v->bucket;
        nlohmann::json list = {{"Effect", "Allow"},
                               {"Action", {"s3:ListBucket", "s3:GetBucketLocation"}},
                               {"Resource", bucket}};
        // s3fs lists the mounted prefix (and asks for the bucket's root when it starts).
        if (!p.empty())
            list["Condition"] = {{"StringLike", {{"s3:prefix", {"", p, p + "/", p + "/*"}}}}};
        statements.push_back(std::move(list));
        nlohmann::json actions = {"s3:GetObject"};
        if (!v->read_only)
            for (const char* a : {"s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                                  "s3:ListMultipartUploadParts"})
                actions.push_back(a);
        statements.push_back({{"Effect", "Allow"},
                              {"Action", std::move(actions)},
                              {"Resource", bucket + "/" + (p.empty() ? "*" : p + "/*")}});
    }
    return nlohmann::json{{"Version", "2012-10-17"}, {"Statement", std::move(statements)}}.dump();
}

std::vector<VolumeCredentials> resolve_volume_credentials(const PoolSpec& spec,
                                                          const std::string& pool_id) {
    std::vector<VolumeCredentials> out(spec.volumes.size());
    std::vector<const S3Volume*> minted;
    for (std::size_t i = 0; i < spec.volumes.size(); ++i) {
        const auto& v = std::get<S3Volume>(spec.volumes[i]);
        if (!v.access_key_id.empty())
            out[i] = {v.access_key_id, v.secret_access_key, v.session_token};
        else
            minted.push_back(&v);
    }
    if (minted.empty()) return out;
    const S3Volume& first = *minted.front();
    const std::string which =
        fmt::format("cannot mount {} at {}", volume_name(first), first.mount_path);
    const auto caller = minting_credentials(spec);
    if (!caller)
        throw VolumeFailure(
            fmt::format("{}: the volume has no credentials of its own (S3Volume::access_key_id, "
                        "secret_access_key) and there are no AWS credentials to mint scoped ones "
                        "from (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or configure "
                        "~/.aws/credentials)",
                        which),
            {});
    if (!caller->session_token.empty())
        throw VolumeFailure(
            fmt::format("{}: the pool's AWS credentials are temporary (they carry a session "
                        "token), and STS mints scoped credentials only from long-term keys; sky "
                        "does not send the pool's own credentials to nodes: give the volume "
                        "credentials of its own (S3Volume::access_key_id, secret_access_key, "
                        "session_token) that reach only its bucket",
                        which),
            {});
    aws::FederationRequest request;
    request.name = ("sky-" + pool_id).substr(0, 32);
    request.policy = volume_policy(minted);
    const auto wanted = spec.timeout + std::chrono::minutes(10);
    request.duration =
        std::clamp<std::chrono::seconds>(std::chrono::duration_cast<std::chrono::seconds>(wanted),
                                         std::chrono::seconds(900), std::chrono::seconds(129600));
    aws::TemporaryCredentials t;
    try {
        t = aws::get_federation_token(
            {caller->access_key_id, caller->secret_access_key, caller->session_token}, request);
    } catch (const HttpError& e) {
        throw VolumeFailure(
            fmt::format(
                "{}: STS GetFederationToken (scoped credentials for the volumes) failed: "
                "{}{}",
                which, e.code().empty() ? std::string() : e.code() + ": ",
                e.provider_message().empty() ? std::string(e.what()) : e.provider_message()),
            {});
    } catch (const ConfigError&) {
        throw;
    } catch (const std::exception& e) {
        throw VolumeFailure(
            fmt::format("{}: STS GetFederationToken (scoped credentials for the volumes) failed: "
                        "{}",
                        which, e.what()),
            {});
    }
    for (std::size_t i = 0; i < spec.volumes.size(); ++i)
        if (std::get<S3Volume>(spec.volumes[i]).access_key_id.empty())
            out[i] = {t.credentials.access_key_id, t.credentials.secret_access_key,
                      t.credentials.session_token};
    return out;
}

std::vector<std::string> s3fs_arguments(const S3Volume& v) {
    const std::string p = trimmed_prefix(v.prefix);
    std::vector<std::string> a = {p.empty() ? v.bucket : v.bucket + ":/" + p, v.mount_path};
    // Foreground: mount.sh keeps its pid, sees it exit on a failed check and reads its log; a
    // failed mount then leaves no dead mount behind (a daemonized s3fs leaves one).
    a.emplace_back("-f");
    auto opt = [&](std::string o) {
        a.emplace_back("-o");
        a.push_back(std::move(o));
    };
    opt("dbglevel=err");
    if (v.read_only) opt("ro");
    if (!v.endpoint.empty()) {
        std::string url = v.endpoint;
        while (!url.empty() && url.back() == '/') url.pop_back();
        opt("url=" + url);
        // Other S3 services rarely serve bucket.host names: address the bucket in the path.
        opt("use_path_request_style");
    } else if (!v.region.empty()) {
        opt("url=https://s3." + v.region + ".amazonaws.com");
    }
    if (!v.region.empty()) opt("endpoint=" + v.region);
    return a;
}

std::string volumes_dir(const std::string& run_dir) { return run_dir + "/volumes"; }

std::string unmount_script_path(const std::string& run_dir) {
    return volumes_dir(run_dir) + "/unmount.sh";
}

VolumePlan plan_volumes(const std::vector<Volume>& volumes, const std::string& dir,
                        const std::vector<VolumeCredentials>& credentials) {
    VolumePlan plan;
    // Shell assignments, sourced by the subshell that becomes s3fs: the keys reach s3fs through
    // its environment (readable by its owner and root only), never through its command line.
    for (std::size_t i = 0; i < volumes.size() && i < credentials.size(); ++i) {
        const auto& c = credentials[i];
        std::string text =
            fmt::format("export AWS_ACCESS_KEY_ID={}\nexport AWS_SECRET_ACCESS_KEY={}\n",
                        shell_quote(c.access_key_id), shell_quote(c.secret_access_key));
        if (!c.session_token.empty())
            text += fmt::format("export AWS_SESSION_TOKEN={}\n", shell_quote(c.session_token));
        plan.credentials.push_back(std::move(text));
    }

    // What to mount, as values (mount.sh and unmount.sh are the steps, the same for every pool).
    scripts::ScriptValues m("sky volumes: mounts this pool's volumes");
    m.word("dir", dir)
        .number("sky_volumes", static_cast<long long>(volumes.size()))
        .word("sky_failed_mark", node::marks::volume_failed.text)
        .word("sky_mounted_mark", node::marks::volumes_mounted.text)
        .number("sky_mount_wait", kMountWaitSeconds)
        .number("sky_guard_wait", 600 + kMountWaitSeconds * static_cast<long long>(volumes.size()));
    for (std::size_t i = 0; i < volumes.size(); ++i) {
        const auto& v = std::get<S3Volume>(volumes[i]);
        // Its mount path (which mount.sh resolves), the s3fs source, then s3fs's options:
        // s3fs_arguments' first two words swapped.
        auto args = s3fs_arguments(v);
        std::swap(args[0], args[1]);
        m.words(fmt::format("sky_volume_{}", i), args);
    }
    plan.mount_script = m.then({scripts::dir_is_ours_sh(), scripts::mount_sh()});
    scripts::ScriptValues u("sky volumes: unmounts this pool's volumes");
    u.word("dir", dir).number("sky_volumes", static_cast<long long>(volumes.size()));
    plan.unmount_script = u.then({scripts::unmount_sh()});
    return plan;
}

namespace {

// s3fs's own reason in its log: the last critical or error line, without its timestamp.
std::string reason_in(const std::vector<std::string>& lines) {
    static const std::regex stamp(R"(^\S+Z \[(CRT|ERR)\] (\S+:\s*)?)");
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        const std::string& l = *it;
        if (l.find("[CRT]") != std::string::npos && l.find("LowSetLogLevel") == std::string::npos)
            return std::regex_replace(l, stamp, "");
        if (l.rfind("s3fs:", 0) == 0 || l.rfind("fuse:", 0) == 0 || l.rfind("fusermount:", 0) == 0)
            return l;
    }
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        const std::string& l = *it;
        if (l.find("[ERR]") != std::string::npos &&
            l.find("s3fs_exit_fuseloop") == std::string::npos)
            return std::regex_replace(l, stamp, "");
    }
    return {};
}

}  // namespace

void mount_volumes(node::NodeShell& s, const PoolSpec& spec, const std::string& pool_id,
                   const std::string& run_dir) {
    if (spec.volumes.empty()) return;
    const std::vector<VolumeCredentials> credentials = resolve_volume_credentials(spec, pool_id);
    const std::string dir = volumes_dir(run_dir);
    const VolumePlan plan = plan_volumes(spec.volumes, dir, credentials);
    auto mk = s.script(fmt::format("umask 077; mkdir -p {0} && chmod 700 {0}", shell_quote(dir)),
                       std::chrono::seconds(30));
    if (mk.status != 0)
        throw VolumeFailure(fmt::format("cannot mount {}: cannot create {} on the node",
                                        volume_name(spec.volumes.front()), dir),
                            {mk.err});
    // unmount.sh first: whatever happens from here, stop() finds it and undoes what was done.
    s.put(plan.unmount_script, dir + "/unmount.sh", 0700);
    for (std::size_t i = 0; i < plan.credentials.size(); ++i)
        s.put(plan.credentials[i], fmt::format("{}/credentials.{}", dir, i), 0600);
    s.put(plan.mount_script, dir + "/mount.sh", 0700);

    std::vector<std::string> secrets;
    for (const auto& c : credentials)
        for (const std::string* v : {&c.secret_access_key, &c.session_token})
            if (!v->empty()) secrets.push_back(*v);
    auto scrub = [&](std::string line) {
        for (const auto& secret : secrets) {
            for (std::size_t at; (at = line.find(secret)) != std::string::npos;)
                line.replace(at, secret.size(), "[REDACTED]");
        }
        return line;
    };
    std::vector<std::string> lines;
    std::string failed;  // the volume_failed mark's value
    bool mounted = false;
    node::RunOptions eo;
    // apt-get may run first; each mount waits at most kMountWaitSeconds.
    eo.timeout = std::chrono::minutes(10) +
                 std::chrono::seconds(kMountWaitSeconds) * static_cast<int>(spec.volumes.size());
    auto keep = [&](std::string_view line) {
        if (const auto v = node::marks::volume_failed.value_in(line)) {
            failed = std::string(*v);
        } else if (node::marks::volumes_mounted.is(line)) {
            mounted = true;
        } else {
            lines.push_back(scrub(std::string(line)));
            if (lines.size() > 40) lines.erase(lines.begin());
        }
    };
    eo.on_stdout = keep;
    eo.on_stderr = keep;
    auto r = s.run({"bash", dir + "/mount.sh"}, eo);
    if (r.status == 0 && mounted) return;

    // Which volume: the index mount.sh named ("-" when it failed before any).
    const Volume* which = &spec.volumes.front();
    std::string what = failed;
    if (!failed.empty() && failed[0] != '-') {
        std::size_t used = 0;
        try {
            const auto i = std::stoul(failed, &used);
            if (i < spec.volumes.size()) which = &spec.volumes[i];
        } catch (const std::exception&) {
        }
        what = failed.substr(used);
    } else if (!failed.empty()) {
        what = failed.substr(1);
    }
    while (!what.empty() && what.front() == ' ') what.erase(0, 1);
    if (failed.empty())
        what = r.timed_out ? std::string("the mount script timed out")
                           : fmt::format("the mount script ended with exit status {}", r.status);
    const auto& s3 = std::get<S3Volume>(*which);
    std::string reason = reason_in(lines);
    throw VolumeFailure(
        fmt::format("cannot mount {} (bucket {}) at {}: {}{}", volume_name(*which), s3.bucket,
                    s3.mount_path, scrub(what), reason.empty() ? "" : ": " + reason),
        std::move(lines));
}

}  // namespace sky::detail
