#pragma once
// The API server's streaming subresources from C++: `exec` and `portforward` of a pod, over
// WebSocket (Boost.Beast over OpenSSL: Debian's libcurl has no WebSocket) to the server the
// kubeconfig names, with its CA, tls-server-name and the user's credential (a client
// certificate, a bearer token; a 401 re-reads the token file or runs the exec plugin again, once).
// exec offers v5.channel.k8s.io then v4.channel.k8s.io and speaks what the server picks;
// portforward speaks v4.channel.k8s.io (there is no v5 for it). Every operation is bounded: a
// connection, a handshake and an exec each have a deadline; an open port-forward keeps itself
// alive with WebSocket pings and ends when the far side stops answering them.
//
// The blocking calls (exec, open_port_forward) must not run on an I/O core thread.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/stream.hpp"
#include "providers/kubernetes/kubeconfig.hpp"
#include "sky/errors.hpp"

namespace sky::detail::kubernetes {

/// The API server refused a streaming request (no WebSocket upgrade): its HTTP status and the
/// Status message it gave (e.g. 403 `pods "p" is forbidden: User "u" cannot create resource
/// "pods/exec" ...`). Never carries a credential.
class StreamRefused : public sky::Error {
public:
    StreamRefused(int status, std::string message);
    [[nodiscard]] int status() const noexcept { return status_; }
    [[nodiscard]] const std::string& message() const noexcept { return message_; }

private:
    int status_;
    std::string message_;
};

/// A process to run in a pod's container.
struct ExecRequest {
    std::string ns, pod, container;  ///< container: empty for the pod's only one
    std::vector<std::string> argv;
    /// Its standard input, or none (no stdin channel). With v5 the input is closed after it;
    /// with v4 there is no close: argv must read exactly `stdin_data->size()` bytes (head -c N)
    /// or wait for ever.
    std::optional<std::string> stdin_data;
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

/// What an exec did.
struct ExecResult {
    bool exited = false;  ///< the process ran to its end; exit_code is its status
    int exit_code = -1;
    std::string out, err;
    std::string failure;   ///< when it did not run: the server's message
    std::string protocol;  ///< the subprotocol the server chose
};

/// Runs `request` in the pod through the exec subresource and waits for it (up to its
/// timeout). Throws StreamRefused when the server refuses the upgrade (after one retry with
/// a fresh credential on 401), sky::Error on a timeout or a broken connection (naming the pod),
/// sky::ConfigError from the credential.
ExecResult exec(CredentialSource& credentials, const ExecRequest& request);

/// Options of an open port-forward channel.
struct PortForwardOptions {
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
    /// A WebSocket ping after half of it without traffic; the stream ends (an error) when
    /// nothing at all came for all of it. Below the kubelet's idle limit (4 h) and the minutes
    /// of load balancers in front of API servers.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
};

/// Opens a connection to `port` of the pod through the portforward subresource: an io::Stream
/// on the I/O core whose bytes are the port's. Data the server sends on the port's error
/// channel ends the stream with that message as its failure(). Throws as exec does.
std::unique_ptr<io::Stream> open_port_forward(CredentialSource& credentials, const std::string& ns,
                                              const std::string& pod, std::uint16_t port,
                                              const PortForwardOptions& options = {});

}  // namespace sky::detail::kubernetes
