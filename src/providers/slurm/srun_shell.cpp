#include "providers/slurm/srun_shell.hpp"

#include <fmt/format.h>

#include "providers/slurm/slurm_commands.hpp"

namespace sky::detail::slurm {

SrunShell::SrunShell(node::NodeShell& login, std::string job, std::string node_name,
                     std::string home)
    : login_(login), job_(std::move(job)), node_(std::move(node_name)), home_(std::move(home)) {}

node::CommandOutcome SrunShell::run(const std::vector<std::string>& argv,
                                    const node::RunOptions& options) {
    return login_.run(srun_argv(job_, {node_}, argv), options);
}

void SrunShell::upload(const node::ByteSource& read, const std::string& path, int mode,
                       const std::function<void(std::uint64_t)>& progress) {
    constexpr std::size_t cap = 64u << 20;
    std::string data;
    std::byte buf[1 << 16];
    for (std::size_t n; (n = read(buf, sizeof buf)) > 0;) {
        if (data.size() + n > cap)
            throw Error(
                fmt::format("{}: a file of more than {} MiB cannot go through a step's "
                            "stdin",
                            describe(), cap >> 20));
        data.append(reinterpret_cast<const char*>(buf), n);
    }
    auto r = run({"sh", "-c", "umask 077; cat > \"$1\" && chmod \"$2\" \"$1\"", "sh", path,
                  fmt::format("{:o}", mode)},
                 {.timeout = std::chrono::seconds(120), .stdin_data = data});
    if (r.status != 0)
        throw Error(fmt::format("cannot write {} on {}: {}", path, describe(), r.summary()));
    if (progress) progress(data.size());
}

std::string SrunShell::describe() const {
    return fmt::format("{} (job {}, through {})", node_, job_, login_.describe());
}

}  // namespace sky::detail::slurm
