#pragma once
/// \file A stateful fake of the EC2 Query API on 127.0.0.1, for tests: it checks every request's
/// SigV4 signature, the API version, the parameter names and required parameters against the EC2
/// model (service-2.json), keeps instances, key pairs, security groups and images, answers in EC2's
/// XML (written from the model, so any botocore client can read it) and injects faults on demand.
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "aws/sigv4.hpp"
#include "fakes/common/fault_rate.hpp"
#include "support/aws/ec2_model.hpp"

namespace sky::test {

class TestHosts;
class HostBinding;

struct FakeEc2Options {
    std::string access_key_id = "AKIDFAKEEC2EXAMPLE";
    std::string secret_access_key;  ///< required
    std::string region = "us-east-1";
    /// botocore's service-2.json for EC2.
    std::string model_path;
    unsigned short port = 0;  ///< 0 = any free port
    /// When set, every instance is one of these test hosts (its address is the instance's public
    /// and private IP), bound through the shared HostBinding (tests/fakes/common): RunInstances
    /// plays cloud-init (installs the host key from the user-data and the key pair as authorized
    /// key, never running the script), TerminateInstances kills the host's processes and frees
    /// it, and fewer free hosts than MinCount is InsufficientInstanceCapacity.
    TestHosts* hosts = nullptr;
    /// With hosts: false leaves each host its own host key (an instance whose user-data did not
    /// run, or a man in the middle): the client's pin must refuse it.
    bool install_host_key = true;
    /// DescribeInstanceTypes answers: a JSON object of InstanceTypeInfo (boto3-shaped) by type
    /// name, read in place (e.g. the testdata's accelerated-instance-types.json). Empty: no
    /// instance types are known (every answer is empty).
    std::string instance_types_path;
    /// JSON merge patches (RFC 7386) applied to instance types after loading, by type name: a
    /// test's way to make EC2's live facts differ from the catalog's. A type not in the file is
    /// added from its patch.
    std::map<std::string, nlohmann::json> instance_type_overrides;
    /// How long a terminated instance's network interface outlives it, as EC2's do (seconds to
    /// minutes): meanwhile DeleteSecurityGroup of its groups answers DependencyViolation. 0: the
    /// interface goes with the instance.
    std::chrono::milliseconds interface_linger{0};
    /// STS (GetFederationToken, the same port, told apart by the signature's service): the
    /// temporary credentials it hands out. Empty access key id: fresh random ones each time.
    /// Fixed ones let a test give nodes credentials that its S3 server knows.
    sky::detail::aws::Credentials sts_issued;
};

/// A GetFederationToken request the fake STS answered.
struct FederationTokenRequest {
    std::string caller;  ///< the access key id that signed it
    std::string name;
    std::string policy;  ///< the session policy as sent (JSON)
    long long duration_seconds = 0;
    sky::detail::aws::Credentials issued;
};

/// A fault the next matching requests get instead of their answer.
struct Ec2Fault {
    std::string action;  ///< "" = any action
    int status = 503;
    std::string code = "RequestLimitExceeded";
    std::string message = "Request limit exceeded.";
    int count = 1;                       ///< how many requests it applies to
    std::chrono::milliseconds delay{0};  ///< answer this late (a timeout test)
    /// Instead of an error: HTTP 200 with a gzip bomb of this many decoded bytes
    /// (Content-Encoding: gzip), as a hostile or broken endpoint might send. 0: none.
    std::size_t gzip_bomb_bytes = 0;
    /// Instead of an error: the action happens and its answer is never sent (a lost answer;
    /// the client's attempt times out and it asks again).
    bool lose_answer = false;
};

/// Faults at a rate in EC2's own shapes: every well-formed, correctly signed request for
/// `action` gets one with `probability`, of a kind drawn from `kinds`: server_error (500
/// InternalError, 503 Unavailable), throttled (503 RequestLimitExceeded), capacity (500
/// InsufficientInstanceCapacity; RunInstances only, other actions never draw it), expired_auth
/// (401 AuthFailure, 400 RequestExpired): refused before anything happens; stall, malformed
/// (XML cut short, then an HTML page) and truncated (Content-Length says more than is sent): the
/// action happens, its answer is lost.
struct Ec2FaultRate {
    std::string action;  ///< "" = any action
    std::vector<FaultKind> kinds;
    double probability = 0.3;
    std::uint64_t seed = 0;  ///< 0: SKY_FAULT_SEED, else random; printed on stderr either way
};

/// One answer.
struct Ec2Reply {
    int status = 200;
    std::string body;
    /// Extra response headers (e.g. Content-Encoding).
    std::vector<std::pair<std::string, std::string>> headers;
    /// Never sent (the connection stays silent until the client closes it), or cut short.
    enum class Delivery { whole, stall, truncated } delivery = Delivery::whole;
};

/// An error the fake answers with (EC2's code, message and HTTP status).
struct Ec2Failure {
    int status;
    std::string code;
    std::string message;
};

class FakeEc2 {
public:
    explicit FakeEc2(FakeEc2Options options);
    ~FakeEc2();
    FakeEc2(const FakeEc2&) = delete;
    FakeEc2& operator=(const FakeEc2&) = delete;

    [[nodiscard]] unsigned short port() const { return port_; }
    /// "http://127.0.0.1:<port>"
    [[nodiscard]] std::string endpoint() const;

    void inject_fault(Ec2Fault fault);
    /// Adds a fault rate (queued faults are matched first); returns its seed.
    std::uint64_t add_fault_rate(Ec2FaultRate rate);
    /// Ends every fault rate.
    void clear_fault_rates();
    /// Requests that got a fault of this kind from a rate so far.
    [[nodiscard]] int fault_hits(FaultKind kind) const;
    /// Snapshot of every instance, boto3-shaped.
    [[nodiscard]] std::vector<nlohmann::json> instances() const;
    /// Decoded user data of an instance ("" if none or unknown).
    [[nodiscard]] std::string user_data(const std::string& instance_id) const;
    /// The test host index an instance runs on (-1 when none or unknown).
    [[nodiscard]] int host_of(const std::string& instance_id) const;
    /// Sets an instance's state as EC2 would on its own (e.g. "terminated" with state reason
    /// "Server.SpotInstanceTermination" for a spot reclaim); frees its host when it ends.
    void set_instance_state(const std::string& instance_id, const std::string& state,
                            const std::string& reason_code = {});
    /// Requests answered so far, and how many were rejected for their signature.
    [[nodiscard]] int request_count() const { return requests_; }
    /// Every GetFederationToken request STS answered, in order.
    [[nodiscard]] std::vector<FederationTokenRequest> federation_requests() const;
    [[nodiscard]] int auth_failures() const { return auth_failures_; }

    /// Answers one HTTP request (the socket layer calls this; tests may too). Thread-safe.
    Ec2Reply handle(const std::string& method, const std::string& target,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::string& body);

private:
    struct Net;  // the Asio objects, kept out of this header
    void serve();
    nlohmann::json dispatch(const std::string& action, const nlohmann::json& params);
    // STS (fake_sts.cpp): requests signed for the "sts" service.
    Ec2Reply handle_sts(const std::string& method, const std::string& target,
                        const std::vector<std::pair<std::string, std::string>>& headers,
                        const std::string& body);
    nlohmann::json run_instances(const nlohmann::json& params);
    nlohmann::json describe_instances(const nlohmann::json& params);
    nlohmann::json terminate_instances(const nlohmann::json& params);
    nlohmann::json describe_spot_price_history(const nlohmann::json& params);
    nlohmann::json describe_instance_types(const nlohmann::json& params);
    nlohmann::json import_key_pair(const nlohmann::json& params);
    nlohmann::json describe_key_pairs(const nlohmann::json& params);
    nlohmann::json delete_key_pair(const nlohmann::json& params);
    nlohmann::json create_security_group(const nlohmann::json& params);
    nlohmann::json describe_security_groups(const nlohmann::json& params);
    nlohmann::json authorize_ingress(const nlohmann::json& params);
    nlohmann::json describe_images(const nlohmann::json& params);
    nlohmann::json delete_security_group(const nlohmann::json& params);
    void release_host(const std::string& instance_id);  // caller holds mutex_
    // The instance has just been terminated: its interface lingers (caller holds mutex_).
    void interface_outlives(const nlohmann::json& instance);
    void advance_states();
    std::string new_id(const std::string& prefix);

    FakeEc2Options options_;
    sky::detail::aws::ServiceModel model_;
    std::unique_ptr<Net> net_;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> requests_{0};
    std::atomic<int> auth_failures_{0};
    std::thread acceptor_;
    std::mutex threads_mutex_;
    std::vector<std::thread> connections_;

    mutable std::mutex mutex_;  // guards everything below
    std::deque<Ec2Fault> faults_;
    std::vector<std::pair<Ec2FaultRate, std::shared_ptr<FaultDice>>> rates_;
    int rate_hits_[7] = {};
    std::vector<std::string> instance_order_;
    std::map<std::string, nlohmann::json> instances_;
    std::map<std::string, std::string> user_data_;
    std::map<std::string, nlohmann::json> reservations_;     // id -> Reservation (ids of instances)
    std::map<std::string, std::string> client_tokens_;       // token -> reservation id
    std::map<std::string, nlohmann::json> key_pairs_;        // name -> KeyPairInfo
    std::map<std::string, nlohmann::json> security_groups_;  // id -> SecurityGroup
    struct LingeringInterface {
        std::vector<std::string> groups;
        std::chrono::steady_clock::time_point until;
    };
    std::vector<LingeringInterface> interfaces_;  // of terminated instances, while they last
    std::vector<nlohmann::json> images_;
    std::map<std::string, nlohmann::json> instance_types_;  // name -> InstanceTypeInfo (const)
    std::map<std::string, std::string> key_material_;       // key name -> OpenSSH public key line
    std::unique_ptr<HostBinding> binding_;  // with options_.hosts: instances on test hosts
    unsigned long long next_id_ = 1;
    std::vector<FederationTokenRequest> federation_requests_;
};

/// Whether a request is signed for STS (its Authorization's credential scope names "sts").
bool is_sts_request(const std::vector<std::pair<std::string, std::string>>& headers);

/// Decodes EC2 wire parameters (Name.1, A.B) into boto3-shaped JSON by the operation's input
/// shape; throws Ec2Failure (UnknownParameter, MissingParameter, InvalidParameterValue).
nlohmann::json decode_ec2_params(const sky::detail::aws::ServiceModel& model,
                                 const std::string& operation,
                                 const std::vector<std::pair<std::string, std::string>>& params);

/// Writes boto3-shaped JSON as EC2 XML by a shape (the inverse of parse_shape).
void write_ec2_xml(const sky::detail::aws::ServiceModel& model, const nlohmann::json& shape_ref,
                   const nlohmann::json& value, const std::string& element, std::string& out);

}  // namespace sky::test
