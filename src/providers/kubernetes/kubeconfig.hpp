#pragma once
// Credentials and endpoint of a Kubernetes API server, read as client-go reads them: a kubeconfig
// (a `KUBECONFIG` colon list merged in order, the first file that sets a value winning; else
// ~/.kube/config), its context, cluster and user; or, inside a pod, the pod's service account.
// Every refusal is a sky::ConfigError that names the file, context, user or field at fault and
// never a credential (no token, key, or plugin output in any message).
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sky::detail::kubernetes {

/// What sky::Kubernetes asks for (api.md §5c); every field may be empty.
struct KubeconfigRequest {
    std::string kubeconfig;  ///< a path; empty: KUBECONFIG, else ~/.kube/config, else in-cluster
    std::string context;     ///< empty: current-context
    std::string ns;          ///< empty: the context's namespace, else "default"
    /// Not empty: exactly these files, merged in order, instead of `kubeconfig` or the
    /// environment's (a pool's ledger records the files it used, for `sky gc`).
    std::vector<std::filesystem::path> files;
    /// Where a pod's service account is mounted (a test points it elsewhere).
    std::filesystem::path service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

/// A kubeconfig user's `exec` credential plugin.
struct ExecPlugin {
    std::string api_version;  ///< client.authentication.k8s.io/v1 or /v1beta1
    std::string command;      ///< resolved against the kubeconfig's folder when relative with a '/'
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;
    bool provide_cluster_info = false;
};

/// The API server as the chosen context names it.
struct ClusterEndpoint {
    std::string server;           ///< https://host[:port][/path]
    std::string host;             ///< from `server`, without brackets
    std::string port;             ///< from `server`; "443" when absent
    std::string base_path;        ///< from `server`; "" or "/prefix" (no trailing slash)
    std::string ca_pem;           ///< certificate-authority[-data]; empty: the system's roots
    std::string tls_server_name;  ///< names the certificate to expect; empty: `host`
    bool insecure_skip_tls_verify = false;  ///< only ever true for a loopback server
};

/// A resolved configuration: where to go, as whom, in which namespace.
struct KubeTarget {
    std::string source;  ///< the file(s) it came from, or "in-cluster service account"
    std::vector<std::filesystem::path> files;  ///< the files merged, in order (none in-cluster)
    std::string context;                       ///< the context's name ("" in-cluster)
    std::string cluster_name;                  ///< the kubeconfig's name of the cluster
    std::string user_name;                     ///< the kubeconfig's name of the user
    std::string ns;
    ClusterEndpoint cluster;
    std::string client_cert_pem, client_key_pem;  ///< a client certificate (both or neither)
    std::string token;                            ///< a bearer token from the file itself
    std::filesystem::path token_file;             ///< re-read: tokens there rotate
    std::optional<ExecPlugin> exec;
};

/// Reads and resolves the kubeconfig `request` names (see KubeconfigRequest). Throws
/// sky::ConfigError: no kubeconfig and not in a pod, an unreadable or malformed file, an unknown
/// context (naming the known ones), a context naming an unknown cluster or user, a removed
/// `auth-provider` (pointing to its exec plugin), an interactive exec plugin, an
/// `insecure-skip-tls-verify` server off loopback or together with a CA, a server that is not
/// https, a certificate without its key, undecodable `-data`.
KubeTarget load_kubeconfig(const KubeconfigRequest& request);

/// What to present to the API server now.
struct Credential {
    std::string bearer_token;  ///< "Authorization: Bearer ..." when not empty
    std::string client_cert_pem, client_key_pem;
};

/// The credential of a target, as client-go keeps it: a token file re-read at most every minute
/// and after a 401; an exec plugin's answer cached until its `expirationTimestamp` (for the
/// process's life when it has none) and asked again after a 401. Thread-safe.
class CredentialSource {
public:
    explicit CredentialSource(KubeTarget target);

    /// The credential to send. Throws sky::ConfigError when a token file cannot be read or an
    /// exec plugin fails (its command and exit status named, never its output).
    Credential current();

    /// The server answered 401 to `used`: the next current() re-reads the token file and runs
    /// the exec plugin again (unless another thread already replaced `used`).
    void unauthorized(const Credential& used);

    [[nodiscard]] const KubeTarget& target() const { return target_; }

private:
    Credential run_plugin();

    KubeTarget target_;
    std::mutex mutex_;
    std::optional<Credential> cached_;
    std::chrono::system_clock::time_point expires_ = std::chrono::system_clock::time_point::max();
};

/// Parses an RFC 3339 time ("2026-12-01T21:00:00Z", "...T21:00:00.5+02:00"); none when it is
/// not one.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& text);

}  // namespace sky::detail::kubernetes
