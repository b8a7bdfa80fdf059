#pragma once
/// \file A fake of the made-up machine inventory that examples/custom_provider talks to (its
/// README.md has the contract): GET /v1/machines, GET /v1/machines/{id}, POST .../claim, POST
/// .../release, each with a bearer token. With test hosts, each machine is one host: a claim
/// boots it (the boot script's host key, the claimant's key authorized) and a release kills
/// everything on it. Built on the shared HTTP fake (request log, faults) and host binding.
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fakes/common/http_fake.hpp"

namespace sky::test {

class TestHosts;
class HostBinding;

/// One machine of the fleet.
struct FleetMachine {
    std::string id;
    std::string type;
    int vcpus = 8;
    double memory_gb = 32;
    std::string gpu;  ///< "" for none
    int gpu_count = 0;
    double hourly_price = 0.10;
    int host = -1;        ///< the test host it is (with FakeFleetOptions::hosts)
    std::string address;  ///< without hosts: what the inventory reports
    int ssh_port = 22;    ///< without hosts
};

struct FakeFleetOptions {
    std::string token;  ///< required: every request must carry "Authorization: Bearer <token>"
    std::vector<FleetMachine> machines;
    /// Machines are these test hosts (FleetMachine::host); none: claims boot nothing.
    TestHosts* hosts = nullptr;
    /// A claimed machine reports "booting" this long before "ready".
    std::chrono::milliseconds boot_time{300};
};

/// A machine as the inventory holds it now.
struct FleetMachineState {
    std::string id, type;
    std::string state;  ///< "free", "booting", "ready", "down"
    std::string pool;   ///< the claim's label, "" when free
    std::string claim;  ///< the claim's id, "" when free
    std::string boot_script, public_key;
    int claims = 0;    ///< how often it was claimed
    int releases = 0;  ///< how often a claim on it was released
};

class FakeFleet {
public:
    explicit FakeFleet(FakeFleetOptions options);
    ~FakeFleet();
    FakeFleet(const FakeFleet&) = delete;
    FakeFleet& operator=(const FakeFleet&) = delete;

    /// "http://127.0.0.1:<port>"
    [[nodiscard]] std::string url() const { return http_->url(); }
    /// The server: its request log and fault injection.
    [[nodiscard]] HttpFake& http() { return *http_; }

    [[nodiscard]] std::vector<FleetMachineState> machines() const;
    /// Machines that are not free (claimed, booting or ready).
    [[nodiscard]] int claimed() const;
    /// Another user claims a machine (nothing boots): a sky pool cannot have it.
    void claim_for_someone_else(const std::string& id, const std::string& pool);
    /// Takes a machine out of service ("down"), or puts it back ("free").
    void set_down(const std::string& id, bool down);

private:
    struct Machine {
        FleetMachine spec;
        FleetMachineState now;
        std::chrono::steady_clock::time_point claimed_at;
        bool booted = false;
    };
    HttpReply list_machines();
    HttpReply get_machine(const HttpRequest& r);
    HttpReply claim(const HttpRequest& r);
    HttpReply release(const HttpRequest& r);
    Machine* find(const std::string& id);  // caller holds mutex_
    std::string state_of(const Machine& m) const;
    std::string to_json(const Machine& m) const;

    FakeFleetOptions options_;
    std::unique_ptr<HostBinding> binding_;
    mutable std::mutex mutex_;
    std::vector<Machine> machines_;
    unsigned long next_claim_ = 1;
    std::unique_ptr<HttpFake> http_;  // last: stops serving before the state goes
};

}  // namespace sky::test
