#pragma once
// A compute node of a Slurm job as a node shell: its commands are steps of the job (srun
// --overlap on that node) run through the login node's shell, its channels go from the login
// node, which reaches the compute nodes.
#include <string>

#include "node/shell.hpp"

namespace sky::detail::slurm {

class SrunShell final : public node::NodeShell {
public:
    /// Node `node_name` of job `job`, reached through `login` (which outlives this shell);
    /// `home` is $HOME there.
    SrunShell(node::NodeShell& login, std::string job, std::string node_name, std::string home);

    using NodeShell::run;
    node::CommandOutcome run(const std::vector<std::string>& argv,
                             const node::RunOptions& options) override;
    /// Through a step's stdin: at most 64 MiB (the program itself goes by sbcast or a shared
    /// home, never this way).
    void upload(const node::ByteSource& read, const std::string& path, int mode,
                const std::function<void(std::uint64_t)>& progress = {}) override;
    const std::string& home() const override { return home_; }
    const std::string& user() const override { return login_.user(); }
    std::unique_ptr<io::Stream> open_channel(const std::string& host, std::uint16_t port,
                                             std::chrono::milliseconds timeout) override {
        return login_.open_channel(host, port, timeout);
    }
    bool reconnect(std::chrono::milliseconds within) override { return login_.reconnect(within); }
    [[nodiscard]] std::uint64_t connection() const override { return login_.connection(); }
    void drop(std::uint64_t connection) noexcept override { login_.drop(connection); }
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] bool alive() const override { return login_.alive(); }
    /// The login node's shell is the backend's: it stays open.
    void close() noexcept override {}

private:
    node::NodeShell& login_;
    std::string job_, node_, home_;
};

}  // namespace sky::detail::slurm
