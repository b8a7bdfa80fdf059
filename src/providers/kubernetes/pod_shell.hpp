#pragma once
// A pod as a node shell: its commands run through the API server's exec subresource (the exit
// code from the status channel), its uploads go through exec's stdin length-delimited (`head -c
// N`, so that v4, which cannot close stdin, works as v5 does), its channels are port-forwards to
// the pod's own ports. Nothing of a worker's life hangs on an exec stream: the worker is started
// detached and found again by its files.
#include <memory>
#include <string>

#include "node/shell.hpp"
#include "providers/kubernetes/api.hpp"
#include "providers/kubernetes/pods.hpp"

namespace sky::detail::kubernetes {

class PodShell final : public node::NodeShell {
public:
    /// Pod `pod` in `ns` through `api`'s server. Asks the pod once for its user and a private
    /// home: $HOME where `$HOME/.sky` can be made, else a fresh 0700 directory under /tmp (images
    /// that run as a random user with no writable home), which every command then gets as $HOME.
    /// Throws StreamRefused (the API's
    /// refusal, e.g. no `pods/exec`) or sky::Error when it cannot.
    PodShell(std::shared_ptr<KubeApi> api, std::string ns, std::string pod);

    using NodeShell::run;
    node::CommandOutcome run(const std::vector<std::string>& argv,
                             const node::RunOptions& options) override;
    void upload(const node::ByteSource& read, const std::string& path, int mode,
                const std::function<void(std::uint64_t)>& progress = {}) override;
    [[nodiscard]] const std::string& home() const override { return home_; }
    [[nodiscard]] const std::string& user() const override { return user_; }
    /// A port-forward to `port` of the pod itself: `host` must be the pod (127.0.0.1,
    /// localhost); throws ChannelRefused when the pod answers that nothing listens there.
    std::unique_ptr<io::Stream> open_channel(const std::string& host, std::uint16_t port,
                                             std::chrono::milliseconds timeout) override;
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] bool alive() const override { return !closed_; }
    void close() noexcept override { closed_ = true; }

    /// The exec subprotocol the server chose (v5.channel.k8s.io or v4.channel.k8s.io).
    [[nodiscard]] const std::string& protocol() const { return protocol_; }

private:
    std::shared_ptr<KubeApi> api_;
    std::string ns_, pod_;
    std::string home_, user_, protocol_;
    bool private_home_ = false;  // home_ is a directory under /tmp: commands get it as $HOME
    bool closed_ = false;
};

}  // namespace sky::detail::kubernetes
