#pragma once
/// \file Where nodes come from (api.md §5).
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sky {

/// Nodes are worker processes on this machine: the same runtime as a cloud node, no cloud.
struct Local {
    std::string workdir;  ///< working directory of the workers (empty: the client's)
};
/// Machines you already have, reached over SSH; node i is hosts[i].
struct SSH {
    std::vector<std::string> hosts;
    std::string user = "root";
    int port = 22;
    std::string identity_file;  ///< private key (empty: ~/.ssh/id_ed25519)
    std::string
        known_hosts;  ///< known_hosts file pinning the hosts' keys (empty: ~/.ssh/known_hosts)
};
/// Amazon EC2.
struct AWS {
    std::string region = "us-east-1";
    bool use_ssm = false;
    std::string endpoint;  ///< empty: AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL, else AWS's
    std::string profile;   ///< empty: AWS_PROFILE, else "default"
};
/// RunPod GPU pods.
struct RunPod {
    std::string cloud_type = "SECURE";
    std::string endpoint;
};
/// Vast.ai marketplace.
struct VastAI {
    double min_reliability = 0.95;
    std::string endpoint;
};
/// Verda (formerly DataCrunch).
struct Verda {
    std::string region;  ///< empty: first region with capacity
    std::string endpoint;
};
/// DigitalOcean GPU droplets.
struct DigitalOcean {
    std::string region = "nyc1";
    std::string endpoint;
};

/// A provider configuration, implicitly constructible from each config struct.
class Provider {
public:
    using Config = std::variant<Local, SSH, AWS, RunPod, VastAI, Verda, DigitalOcean>;

    Provider() = default;
    Provider(Local c) : config_(std::move(c)) {}
    Provider(SSH c) : config_(std::move(c)) {}
    Provider(AWS c) : config_(std::move(c)) {}
    Provider(RunPod c) : config_(std::move(c)) {}
    Provider(VastAI c) : config_(std::move(c)) {}
    Provider(Verda c) : config_(std::move(c)) {}
    Provider(DigitalOcean c) : config_(std::move(c)) {}

    /// "local", "ssh", "aws", "runpod", "vastai", "verda", "digitalocean".
    [[nodiscard]] std::string_view name() const noexcept {
        constexpr std::string_view names[] = {"local",  "ssh",   "aws",         "runpod",
                                              "vastai", "verda", "digitalocean"};
        return names[config_.index()];
    }
    /// The config if it is a C, else null.
    template <class C>
    [[nodiscard]] const C* get() const noexcept {
        return std::get_if<C>(&config_);
    }
    [[nodiscard]] const Config& config() const noexcept { return config_; }

private:
    Config config_;
};

}  // namespace sky
