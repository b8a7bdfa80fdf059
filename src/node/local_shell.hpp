#pragma once
// This machine as a node's shell (a Slurm cluster whose login node is this machine): commands
// are subprocesses, uploads plain files, channels TCP connections.
#include "node/shell.hpp"

namespace sky::detail::node {

class LocalShell final : public NodeShell {
public:
    /// Throws sky::Error when this machine's home directory or user cannot be learned.
    LocalShell();

    using NodeShell::run;
    /// stdout lines reach on_stdout as they come; stderr lines reach on_stderr at the end.
    CommandOutcome run(const std::vector<std::string>& argv, const RunOptions& options) override;
    void upload(const ByteSource& read, const std::string& path, int mode,
                const std::function<void(std::uint64_t)>& progress = {}) override;
    const std::string& home() const override { return home_; }
    const std::string& user() const override { return user_; }
    std::unique_ptr<io::Stream> open_channel(const std::string& host, std::uint16_t port,
                                             std::chrono::milliseconds timeout) override;
    [[nodiscard]] std::string describe() const override { return "this machine"; }
    [[nodiscard]] bool alive() const override { return true; }
    void close() noexcept override {}

private:
    std::string home_, user_;
};

}  // namespace sky::detail::node
