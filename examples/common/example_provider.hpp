#pragma once
// How every example picks where it runs: sky::Local by default, another provider by a flag.
//
//   --provider local                 (the default: worker processes on this machine)
//   --provider simulated             (sky::Simulated: a cloud in a box, no credentials)
//   --provider ssh --hosts A,B[,...] [--user root] [--port 22] [--identity FILE]
//                  [--known-hosts FILE]
//   --provider aws | runpod | vastai | verda | digitalocean
//                                    (credentials from the environment, as docs/providers.md says)
//
// Unknown flags are left for the example itself. Only the public API is used here, as a user's
// program would.
#include <cstdlib>
#include <iostream>
#include <sky/sky.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace examples {

/// The value after `--name` (or `--name=value`), or `fallback` when the flag is absent.
inline std::string flag(int argc, char** argv, std::string_view name, std::string fallback = {}) {
    const std::string dashed = "--" + std::string(name);
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == dashed && i + 1 < argc) return argv[i + 1];
        if (a.size() > dashed.size() && a.substr(0, dashed.size()) == dashed &&
            a[dashed.size()] == '=')
            return std::string(a.substr(dashed.size() + 1));
    }
    return fallback;
}

/// True when `--name` is on the command line.
inline bool has_flag(int argc, char** argv, std::string_view name) {
    const std::string dashed = "--" + std::string(name);
    for (int i = 1; i < argc; ++i)
        if (argv[i] == dashed) return true;
    return false;
}

/// The provider the command line asks for (sky::Local{} without --provider). Throws
/// std::invalid_argument naming a flag it cannot use.
inline sky::Provider provider_from_args(int argc, char** argv) {
    const std::string name = flag(argc, argv, "provider", "local");
    if (name == "local") return sky::Local{};
    if (name == "simulated") return sky::Simulated{};
    if (name == "ssh") {
        sky::SSH ssh;
        std::stringstream hosts(flag(argc, argv, "hosts"));
        for (std::string h; std::getline(hosts, h, ',');)
            if (!h.empty()) ssh.hosts.push_back(h);
        if (ssh.hosts.empty())
            throw std::invalid_argument("--provider ssh needs --hosts HOST[,HOST...]");
        ssh.user = flag(argc, argv, "user", ssh.user);
        ssh.port = std::stoi(flag(argc, argv, "port", std::to_string(ssh.port)));
        ssh.identity_file = flag(argc, argv, "identity");
        ssh.known_hosts = flag(argc, argv, "known-hosts");
        return ssh;
    }
    if (name == "aws") return sky::AWS{};
    if (name == "runpod") return sky::RunPod{};
    if (name == "vastai") return sky::VastAI{};
    if (name == "verda") return sky::Verda{};
    if (name == "digitalocean") return sky::DigitalOcean{};
    throw std::invalid_argument("--provider: unknown provider \"" + name +
                                "\" (local, simulated, ssh, aws, runpod, vastai, verda, "
                                "digitalocean)");
}

/// The number of nodes to use: `--nodes N`, else `fallback`; on SSH never more than the hosts.
inline int nodes_from_args(int argc, char** argv, int fallback) {
    int n = std::stoi(flag(argc, argv, "nodes", std::to_string(fallback)));
    if (flag(argc, argv, "provider") == "ssh") {
        int hosts = 1;
        for (char c : flag(argc, argv, "hosts")) hosts += c == ',';
        if (n > hosts) n = hosts;
    }
    return n;
}

}  // namespace examples
