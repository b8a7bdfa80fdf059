#pragma once
// A node reached over SSH (ssh/session.hpp): every command an exec channel, every upload SFTP,
// every channel a direct-tcpip tunnel from there; reconnect() makes a new session with the same
// options. At most 8 commands run at once on one connection (sshd's MaxSessions is 10).
#include <memory>

#include "node/shell.hpp"

namespace sky::detail::ssh {
class Session;
struct SessionOptions;
}  // namespace sky::detail::ssh

namespace sky::detail::node {

class SshShell final : public NodeShell {
public:
    /// Connects (a wait on the I/O core). Throws ssh::SshError (unreachable, refused key, wrong
    /// host key). `home`, when known, spares the command that learns it.
    explicit SshShell(const ssh::SessionOptions& options, std::string home = {});
    ~SshShell() override;

    using NodeShell::run;
    /// A lost connection throws ssh::SshError; a refused exec ssh::ChannelError.
    CommandOutcome run(const std::vector<std::string>& argv, const RunOptions& options) override;
    void upload(const ByteSource& read, const std::string& path, int mode,
                const std::function<void(std::uint64_t)>& progress = {}) override;
    /// Learned once, with the user (one command), unless given.
    const std::string& home() const override;
    const std::string& user() const override;
    std::unique_ptr<io::Stream> open_channel(const std::string& host, std::uint16_t port,
                                             std::chrono::milliseconds timeout) override;
    /// A direct-streamlocal channel; a refused one throws ChannelRefused.
    std::unique_ptr<io::Stream> open_unix_socket(const std::string& path,
                                                 std::chrono::milliseconds timeout) override;
    bool reconnect(std::chrono::milliseconds within) override;
    [[nodiscard]] std::uint64_t connection() const override;
    void drop(std::uint64_t connection) noexcept override;
    /// Not one of the 8 command slots: it holds its channel for the pool's life (sshd's
    /// MaxSessions 10 leaves room).
    void hold(const std::vector<std::string>& argv) override;
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] bool alive() const override;
    void close() noexcept override;

    /// The session in use (a reconnect replaces it while what runs on the old one still ends):
    /// for what only SSH has, such as a channel to a Unix socket. Null after close().
    [[nodiscard]] std::shared_ptr<ssh::Session> session() const;

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace sky::detail::node
