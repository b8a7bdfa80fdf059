#pragma once
/// \file A judge of sky's Kubernetes client for what a real test cluster cannot easily show: an
/// API server on 127.0.0.1 over TLS (Boost.Beast over OpenSSL, its own self-signed certificate)
/// that keeps pods and ConfigMaps of one namespace as the real one does (resourceVersions, list
/// and watch by label, deletion with a grace period, the garbage collector of owned pods) and
/// refuses as the real one refuses: every refusal a `Status` object (kind, apiVersion, metadata,
/// status "Failure", message, reason, details, code) with the words kube-apiserver 1.20 uses.
/// The refusals it is told to make: an expired bearer token (401), no `pods/exec` right (403 on
/// the exec upgrade), a ResourceQuota that is full (403 on a pod's create), throttling (429 with
/// Retry-After), and a kubelet that never confirms a pod's deletion (the pod stays Terminating
/// until a deletion with grace period 0). Its pods run nothing of their own: an allowed exec is a
/// WebSocket in the subprotocols the judge is told to speak (a v5-only server, by default), its
/// argv run on this machine with the stdin the client closed (v5's close of channel 0), its
/// output and Status on the channels; or a stream the judge drops after the first output.
/// Port-forward is answered 501.
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace sky::test {

/// One request as the fake saw it.
struct KubeRequest {
    std::string method, path, query;
    std::string token;  ///< the bearer token it carried ("" none)
    int status = 0;     ///< what the fake answered
};

class FakeKubeApi {
public:
    /// Starts the server; writes its CA, a token file ("token-1", accepted) and a kubeconfig
    /// (a `tokenFile` user, namespace sky-test) into a fresh directory.
    FakeKubeApi();
    /// Stops the server (bounded) and removes the directory.
    ~FakeKubeApi();
    FakeKubeApi(const FakeKubeApi&) = delete;
    FakeKubeApi& operator=(const FakeKubeApi&) = delete;

    [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
    [[nodiscard]] std::filesystem::path kubeconfig() const { return dir_ / "kubeconfig"; }
    [[nodiscard]] std::filesystem::path token_file() const { return dir_ / "token"; }
    [[nodiscard]] std::string server() const;
    [[nodiscard]] static std::string ns() { return "sky-test"; }

    /// The bearer tokens the server accepts from now on (others: 401 Unauthorized).
    void accept_tokens(std::set<std::string> tokens);
    /// Writes `token` into the token file.
    void write_token(const std::string& token) const;
    /// Whether the user may use pods/exec (default true: then exec is 501, the fake runs
    /// nothing).
    void allow_exec(bool allowed);
    /// A ResourceQuota of `pods` pods in the namespace (-1: none).
    void pod_quota(int pods);
    /// The next `count` requests of `method` on paths starting with `prefix` get 429 with
    /// Retry-After `retry_after` seconds.
    void throttle(std::string method, std::string prefix, int count, int retry_after);
    /// The exec subprotocols the server speaks, in its order of preference (default: only
    /// v5.channel.k8s.io); an upgrade offering none of them is refused (403, as a 1.20
    /// server's CRI streaming refuses v5).
    void exec_protocols(std::vector<std::string> protocols);
    /// Whether the judge drops every exec's connection (TCP closed, no close frame, no Status)
    /// right after the command's first output.
    void drop_exec_streams(bool drop);
    /// Whether the kubelet confirms a deletion (default true: a deleted pod is gone at once);
    /// false: it stays with its deletionTimestamp until deleted with grace period 0.
    void kubelet_confirms(bool confirms);

    /// Every request so far.
    [[nodiscard]] std::vector<KubeRequest> requests() const;
    /// Requests of `method` whose path starts with `prefix` (and, if not empty, carried
    /// `token`).
    [[nodiscard]] int count(const std::string& method, const std::string& prefix,
                            const std::string& token = "") const;
    /// The pods and ConfigMaps that exist now (Terminating pods included).
    [[nodiscard]] std::vector<nlohmann::json> pods() const;
    [[nodiscard]] std::size_t configmaps() const;

    struct Reply {
        int status = 200;
        std::string body;
        std::vector<std::pair<std::string, std::string>> headers;
        std::chrono::milliseconds delay{0};
        /// status 101: an exec upgrade accepted in `protocol`, of `argv` (stdin: whether the
        /// client sends input), dropped after the first output when `drop`.
        std::string protocol;
        std::vector<std::string> argv;
        bool stdin_open = false, drop = false;
    };
    /// Answers one request (the server's socket side calls this); `offered` is the
    /// Sec-WebSocket-Protocol header of an upgrade.
    Reply handle(const std::string& method, const std::string& target,
                 const std::string& authorization, const std::string& body,
                 const std::string& offered = "");

private:
    struct Net;
    Reply route(const std::string& method, const std::string& path,
                const std::map<std::string, std::string>& query, const std::string& body,
                const std::string& raw_query, const std::string& offered);
    Reply pods_collection(const std::string& method, const std::map<std::string, std::string>& q,
                          const std::string& body);
    Reply one_pod(const std::string& method, const std::string& name,
                  const std::map<std::string, std::string>& q, const std::string& body);
    Reply configmaps(const std::string& method, const std::string& name, const std::string& body);
    // Deletes pod `name` as the API server and the kubelet do; under m_.
    void delete_pod_locked(const std::string& name, std::optional<long> grace);
    void event_locked(const std::string& type, const nlohmann::json& object);

    std::filesystem::path dir_;
    std::unique_ptr<Net> net_;
    unsigned short port_ = 0;

    mutable std::mutex m_;
    std::set<std::string> tokens_{"token-1"};
    bool exec_allowed_ = true;
    int quota_ = -1;
    struct Throttle {
        std::string method, prefix;
        int count = 0, retry_after = 1;
    };
    std::vector<Throttle> throttles_;
    bool confirms_ = true;
    std::vector<std::string> exec_protocols_{"v5.channel.k8s.io"};
    bool drop_exec_ = false;
    long rv_ = 1000;
    long uid_ = 0;
    std::map<std::string, nlohmann::json> pods_, configmaps_;
    struct Event {
        long rv;
        std::string type;
        nlohmann::json object;
    };
    std::vector<Event> events_;
    std::vector<KubeRequest> log_;
};

}  // namespace sky::test
