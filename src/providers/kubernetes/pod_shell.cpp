#include "providers/kubernetes/pod_shell.hpp"

#include <fmt/format.h>

#include <sstream>

#include "providers/kubernetes/scripts.hpp"
#include "providers/kubernetes/streaming.hpp"
#include "util/text.hpp"

namespace sky::detail::kubernetes {

namespace {

void deliver(const std::string& text, const node::LineCallback& to) {
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) to(l);
}

}  // namespace

PodShell::PodShell(std::shared_ptr<KubeApi> api, std::string ns, std::string pod)
    : api_(std::move(api)), ns_(std::move(ns)), pod_(std::move(pod)) {
    // The user, then a home of its own: $HOME/.sky where it can be made, else a private
    // directory under /tmp (mktemp -d: 0700, a name no other user can take first).
    ExecRequest r;
    r.ns = ns_;
    r.pod = pod_;
    r.container = kContainer;
    r.argv = {"sh", "-c", std::string(scripts::home_sh()), "sky-home"};
    r.timeout = std::chrono::seconds(60);
    const ExecResult e = exec(api_->credentials(), r);
    protocol_ = e.protocol;
    std::istringstream lines(e.out);
    std::getline(lines, user_);
    std::getline(lines, home_);
    if (home_ == "private") {
        private_home_ = true;
        std::getline(lines, home_);
    }
    if (!e.exited || e.exit_code != 0 || home_.empty() || home_[0] != '/')
        throw Error(fmt::format("pod {}/{}: cannot find a home there: {}", ns_, pod_,
                                e.failure.empty() ? std::string(trim(e.err)) : e.failure));
}

node::CommandOutcome PodShell::run(const std::vector<std::string>& argv,
                                   const node::RunOptions& options) {
    if (closed_) throw Error(describe() + ": the shell is closed");
    ExecRequest r;
    r.ns = ns_;
    r.pod = pod_;
    r.container = kContainer;
    std::vector<std::string> command = argv;
    if (private_home_) command.insert(command.begin(), {"env", "HOME=" + home_});
    if (options.stdin_data.empty()) {
        r.argv = std::move(command);
    } else {
        // Length-delimited: v4 has no stdin close, so the command reads exactly what is sent.
        r.argv = {"sh", "-c", "head -c \"$0\" | \"$@\"",
                  std::to_string(options.stdin_data.size())};
        r.argv.insert(r.argv.end(), command.begin(), command.end());
        r.stdin_data = std::string(options.stdin_data);
    }
    r.timeout = options.timeout.count() > 0 ? options.timeout : std::chrono::hours(24);
    node::CommandOutcome o;
    ExecResult e;
    try {
        e = exec(api_->credentials(), r);
    } catch (const StreamRefused&) {
        throw;
    } catch (const ConfigError&) {
        throw;
    } catch (const Error& x) {
        const std::string what = x.what();
        if (what.find("timed out") != std::string::npos ||
            what.find("time out") != std::string::npos ||
            what.find("deadline") != std::string::npos) {
            o.timed_out = true;
            o.err = what;
            return o;
        }
        throw;
    }
    protocol_ = e.protocol;
    o.status = e.exited ? e.exit_code : 127;
    o.out = std::move(e.out);
    o.err = std::move(e.err);
    if (!e.exited && !e.failure.empty()) o.err += (o.err.empty() ? "" : "\n") + e.failure;
    if (options.on_stdout) {
        deliver(o.out, options.on_stdout);
        o.out.clear();
    }
    if (options.on_stderr) {
        deliver(o.err, options.on_stderr);
        o.err.clear();
    }
    return o;
}

void PodShell::upload(const node::ByteSource& read, const std::string& path, int mode,
                      const std::function<void(std::uint64_t)>& progress) {
    std::string data;
    std::byte buf[1 << 16];
    for (std::size_t n; (n = read(buf, sizeof buf)) > 0;)
        data.append(reinterpret_cast<const char*>(buf), n);
    // Exactly N bytes, checked, then the mode: a cut stream leaves a short file that fails here.
    auto r = run({"sh", "-c",
                  "umask 077; cat > \"$1\" && [ \"$(stat -c %s \"$1\")\" = \"$0\" ] && "
                  "chmod \"$2\" \"$1\"",
                  std::to_string(data.size()), path, fmt::format("{:o}", mode)},
                 {.timeout = std::chrono::seconds(600), .stdin_data = data});
    if (r.status != 0)
        throw Error(fmt::format("cannot write {} on {}: {}", path, describe(), r.summary()));
    if (progress) progress(data.size());
}

std::unique_ptr<io::Stream> PodShell::open_channel(const std::string& host, std::uint16_t port,
                                                   std::chrono::milliseconds timeout) {
    if (host != "127.0.0.1" && host != "localhost" && host != "::1")
        throw Error(fmt::format("{}: a pod's channels go to its own ports only (asked for {}:{})",
                                describe(), host, port));
    PortForwardOptions o;
    o.connect_timeout = timeout;
    try {
        return open_port_forward(api_->credentials(), ns_, pod_, port, o);
    } catch (const StreamRefused& e) {
        if (e.status() == 404) throw node::ChannelRefused(e.what());
        throw;
    }
}

std::string PodShell::describe() const { return fmt::format("pod {}/{}", ns_, pod_); }

}  // namespace sky::detail::kubernetes
