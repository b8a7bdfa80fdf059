// sky::AWS: EC2 instances launched for one pool and terminated with it. The catalog orders the
// offers; the backend walks them on capacity errors, pins each node's host key (generated here and
// installed by user-data, then replaced by one the node makes, read back over the first pinned
// session), and reaches every node over SSH through RemoteNode.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "catalog/names.hpp"
#include "pool/backend.hpp"
#include "providers/aws/ec2_client.hpp"
#include "providers/remote/remote_node.hpp"
#include "sky/catalog.hpp"
#include "sky/providers.hpp"

extern char** environ;

namespace sky::detail {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string env_or(const char* name, std::string fallback = {}) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

std::string trim(std::string s) {
    auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Credentials: the environment wins (as in the AWS CLI), then the shared credentials file's
// section for AWS{.profile}, else AWS_PROFILE, else "default".
std::optional<aws::Credentials> load_credentials(const std::string& profile) {
    return aws::load_default_credentials(profile);
}

// Runs ssh-keygen (bounded); its output is discarded: it may echo key material.
void ssh_keygen(const std::filesystem::path& file, const std::string& comment) {
    std::error_code ec;
    std::filesystem::remove(file, ec);
    std::filesystem::remove(file.string() + ".pub", ec);
    std::vector<std::string> argv{"ssh-keygen", "-q", "-t",    "ed25519", "-N",
                                  "",           "-C", comment, "-f",      file.string()};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    int rc = ::posix_spawnp(&pid, "ssh-keygen", &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        throw ProvisionError(
            "AWS: cannot run ssh-keygen (install openssh-client) to make SSH keys");
    int status = 0;
    bool done = false;
    for (int i = 0; i < 3000 && !done; ++i) {  // 30 s at most
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) done = true;
        if (w < 0) break;
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!done) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
    }
    if (!done || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        !std::filesystem::exists(file.string() + ".pub")) {
        throw ProvisionError("AWS: ssh-keygen failed to make an ed25519 key");
    }
}

// Capacity answers: the offer (or its spot market) has nothing now; another offer may.
bool is_capacity_error(const std::string& code) {
    static const std::set<std::string> codes = {"InsufficientInstanceCapacity",
                                                "InsufficientCapacity",
                                                "InsufficientHostCapacity",
                                                "InsufficientReservedInstanceCapacity",
                                                "SpotMaxPriceTooLow",
                                                "MaxSpotInstanceCountExceeded",
                                                "InstanceLimitExceeded",
                                                "VcpuLimitExceeded",
                                                "Unsupported",
                                                "InsufficientFreeAddressesInSubnet"};
    return codes.count(code) > 0;
}

bool is_not_found(const std::string& code) {
    return code.find("NotFound") != std::string::npos || code == "InvalidGroup.NotFound";
}

std::string error_text(const std::exception& e) {
    if (auto* h = dynamic_cast<const HttpError*>(&e)) {
        if (!h->code().empty()) return h->code() + ": " + h->provider_message();
    }
    return e.what();
}

using aws::list_of;
using aws::str_of;

struct AwsNode {
    std::string instance_id;
    Offer offer;
    bool spot = false;
    std::string public_ip, private_ip;
    std::string host_public_key;    // the pinned host key, "ssh-ed25519 AAAA..."
    bool host_key_rotated = false;  // the user-data key was replaced (or that was tried)
    std::unique_ptr<RemoteNode> remote;
    bool gone = false;  // EC2 says the instance ended (preempted or terminated)
};

class AwsBackend final : public Backend {
public:
    AwsBackend(const PoolSpec& spec, std::string pool_id)
        : spec_(spec), cfg_(*spec.provider.get<AWS>()), pool_id_(std::move(pool_id)) {
        auto credentials = load_credentials(cfg_.profile);
        if (!credentials) {
            throw ConfigError(
                "AWS: no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
                "AWS_SESSION_TOKEN for temporary ones), or configure ~/.aws/credentials (profile " +
                (cfg_.profile.empty() ? env_or("AWS_PROFILE", "default") : cfg_.profile) + ")");
        }
        aws::Ec2ClientConfig cc;
        cc.region = cfg_.region.empty() ? "us-east-1" : cfg_.region;
        const aws::EndpointChoice endpoint = aws::choose_endpoint(cfg_.endpoint);
        cc.endpoint = endpoint.url;
        cc.endpoint_source = endpoint.source;
        cc.credentials = *credentials;
        // EC2 answers capacity errors with HTTP 500: retry by error code only (throttling,
        // InternalError, Unavailable), so a capacity error moves to the next offer at once.
        cc.http.retry.retry_on_server_errors = false;
        client_ = std::make_unique<aws::Ec2Client>(std::move(cc));
        ssh_user_ = env_or("SKY_AWS_SSH_USER", "ubuntu");
        // How long a fresh instance may take to present the pinned host key (user-data runs
        // after sshd first starts); a slow image may need more.
        try {
            boot_wait_ = std::chrono::seconds(
                std::clamp(std::stol(env_or("SKY_AWS_BOOT_WAIT_S", "300")), 1L, 3600L));
        } catch (const std::exception&) {
            throw ConfigError("SKY_AWS_BOOT_WAIT_S: expected a number of seconds");
        }
        name_ = "sky-" + pool_id_;
        // Checked before anything is created: a malformed value is a ConfigError now.
        (void)ssh_ingress_cidr(/*detect=*/false);
    }
    ~AwsBackend() override { stop_all(); }

    std::string provider_name() const override { return "aws"; }
    std::string head_address() const override {
        std::lock_guard lk(m_);
        if (nodes_.empty()) return "127.0.0.1";
        return nodes_[0].private_ip.empty() ? nodes_[0].public_ip : nodes_[0].private_ip;
    }

    void provision(int nodes, const std::function<void(Event)>& emit) override {
        const std::string region = client_->region();
        SelectionRequest req{.accelerator = spec_.accelerator,
                             .cpu = spec_.cpu,
                             .memory = spec_.memory,
                             .region = region,
                             .spot = spec_.spot,
                             .machine = spec_.machine};
        Catalog catalog = Catalog::embedded();
        catalog.merge(live_instance_types(catalog, req, emit));
        if (wants_spot(spec_.spot)) catalog.merge(live_spot_prices(catalog, req, emit));
        std::vector<Offer> offers = catalog.select(req, "aws");
        if (offers.empty()) {
            throw ProvisionError("AWS: no instance type matches: " +
                                 explain_no_match(catalog.offers("aws"), req));
        }

        // Credentials (signatures) and user-data go to a host the user named: say so once.
        if (client_->custom_endpoint())
            emit(ErrorEvent{"AWS: notice: " + client_->endpoint_notice(), std::nullopt});
        emit(InfraCreating{});
        create_infra(emit);
        emit(InfraCreated{region});

        const int want_spot = spot_node_count(spec_.spot, nodes);
        const bool fallback = on_demand_fallback(spec_.spot);
        int rounds = 1;
        std::chrono::seconds round_pause{0};
        if (auto* a = std::get_if<Spot::Always>(&spec_.spot.strategy)) {
            rounds = 1 + std::clamp(a->retries, 0, 100);
            round_pause = a->interval;
        }
        std::vector<ProvisionAttempt> attempts;
        for (int round = 0; round < rounds; ++round) {
            if (round > 0)
                std::this_thread::sleep_for(std::min(round_pause, std::chrono::seconds(60)));
            for (std::size_t o = 0; o < offers.size(); ++o) {
                const Offer& offer = offers[o];
                emit(InstanceLaunching{nodes, offer.instance_type, "aws"});
                if (try_offer(offer, nodes, want_spot, fallback,
                              fmt::format("{}-{}-{}", name_, round, o), attempts, emit)) {
                    return;
                }
            }
        }
        std::string list;
        for (const auto& a : attempts) {
            list += fmt::format("\n  {} in {} ({}): {}", a.instance_type, a.region,
                                a.spot ? "spot" : "on-demand", a.error);
        }
        throw ProvisionError(
            fmt::format("AWS: could not launch {} node(s); every offer failed:{}", nodes, list),
            std::move(attempts));
    }

    NodeStart connect(int node, const std::function<void(Event)>& emit) override {
        AwsNode* n = nullptr;
        {
            std::lock_guard lk(m_);
            n = &nodes_.at(static_cast<std::size_t>(node));
        }
        if (n->remote && n->remote->reachable()) {
            n->remote->restart_worker(emit);  // a replacement worker on the same instance
        } else {
            RemoteNodeSpec where;
            where.host = n->public_ip;
            where.port = 22;
            where.user = ssh_user_;
            where.private_key_file = dir_ / "key";
            where.power_off_on_expiry = true;  // shutdown terminates (InstanceInitiatedShutdown)
            if (n->spot) where.preemption_probe = preemption_probe();
            where.connect_attempts = 10;
            // The pool's nodes share one shipment: each file leaves the client once, the others
            // copy it from a node that has it over the VPC's private addresses.
            where.shipment = shipment();
            where.peer_address = n->private_ip.empty() ? n->public_ip : n->private_ip;
            // A fresh instance may still present its image's host key until user-data has run:
            // a mismatch then is retried for a while, never accepted.
            auto until = Clock::now() + boot_wait_;
            std::unique_ptr<RemoteNode> remote;
            for (int attempt = 0;; ++attempt) {
                try {
                    // The user-data key is single-use: once it has authenticated the node, the
                    // node makes a new one and the pool pins that instead.
                    if (!n->host_key_rotated) rotate_host_key(*n, emit);
                    where.host_key = ssh::HostKeyPin::public_key(n->host_public_key);
                    remote = RemoteNode::start(where, spec_, pool_id_, node, n->instance_id, emit);
                    break;
                } catch (const ssh::HostKeyMismatch&) {
                    if (attempt >= 30 || Clock::now() > until) throw;
                } catch (const ssh::AuthenticationError&) {
                    if (attempt >= 30 || Clock::now() > until) throw;
                } catch (const ssh::ConnectError&) {
                    if (attempt >= 30 || Clock::now() > until) throw;
                }
                std::this_thread::sleep_for(
                    std::min<Clock::duration>(std::chrono::seconds(5), boot_wait_ / 4));
            }
            std::lock_guard lk(m_);
            n->remote = std::move(remote);
        }
        NodeStart s;
        s.instance = instance_of(node, *n);
        s.token = n->remote->token();
        s.transport = n->remote->connect_worker();
        return s;
    }

    NodeExit exit_reason(int node) override {
        AwsNode* n = nullptr;
        {
            std::lock_guard lk(m_);
            n = &nodes_.at(static_cast<std::size_t>(node));
        }
        // The cloud knows first: a spot reclaim shows as the instance's state reason.
        try {
            QueryParams p;
            p.set("InstanceId.1", n->instance_id);
            json r = client_->call_json("DescribeInstances", p);
            for (const auto& res : list_of(r, "reservationSet")) {
                for (const auto& inst : list_of(res, "instancesSet")) {
                    std::string reason = inst.contains("stateReason")
                                             ? str_of(inst["stateReason"], "code")
                                             : std::string();
                    if (reason == "Server.SpotInstanceTermination") {
                        mark_gone(*n);
                        return {NodeLostError::Reason::preempted,
                                "AWS reclaimed the spot instance " + n->instance_id};
                    }
                    std::string state =
                        inst.contains("instanceState") ? str_of(inst["instanceState"], "name") : "";
                    if (state == "shutting-down" || state == "terminated" || state == "stopped" ||
                        state == "stopping") {
                        mark_gone(*n);
                        return {NodeLostError::Reason::unreachable,
                                fmt::format("instance {} is {} ({})", n->instance_id, state,
                                            reason.empty() ? "no reason given" : reason)};
                    }
                }
            }
        } catch (const std::exception&) {
            // Fall through to what SSH saw.
        }
        if (!n->remote) return {NodeLostError::Reason::unreachable, "the node was never started"};
        return n->remote->exit_reason();
    }

    bool can_restart(int node) const override {
        std::lock_guard lk(m_);
        const auto& n = nodes_.at(static_cast<std::size_t>(node));
        return !n.gone && n.remote && n.remote->reachable();
    }

    void stop_all() noexcept override {
        try {
            std::vector<std::unique_ptr<RemoteNode>> remotes;
            std::vector<std::string> ids;
            {
                std::lock_guard lk(m_);
                for (auto& n : nodes_) {
                    if (n.remote) remotes.push_back(std::move(n.remote));
                    if (!n.instance_id.empty()) ids.push_back(n.instance_id);
                }
                for (auto& id : launched_)
                    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
            }
            std::vector<std::thread> threads;
            for (auto& r : remotes) threads.emplace_back([p = r.get()] { p->stop(); });
            for (auto& t : threads) t.join();
            remotes.clear();
            // Also whatever carries this pool's tag: an instance whose RunInstances answer was
            // lost (a timeout after EC2 had launched it) is known only by its tag.
            for (auto& id : tagged_live_instances())
                if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
            terminate(ids);
            {
                std::lock_guard lk(m_);
                launched_.clear();
            }
            delete_infra();
        } catch (...) {
            // Never throws: what is left is tagged sky:pool and shows in `sky ls --provider aws`.
        }
    }

private:
    using QueryParams = aws::QueryParams;

    void mark_gone(AwsNode& n) {
        std::lock_guard lk(m_);
        n.gone = true;
    }

    Instance instance_of(int node, const AwsNode& n) const {
        Instance i;
        i.id = n.instance_id;
        i.node = node;
        i.provider = "aws";
        i.instance_type = n.offer.instance_type;
        i.public_ip = n.public_ip;
        i.private_ip = n.private_ip.empty() ? n.public_ip : n.private_ip;
        i.spot = n.spot;
        i.hourly_price = n.offer.hourly_price(n.spot);
        i.on_demand_price = n.offer.on_demand_price;
        return i;
    }

    // Who may reach port 22: SKY_CLIENT_CIDR when set (validated), else this client's public
    // address as AWS sees it (checkip.amazonaws.com over TLS, only when talking to AWS's own
    // endpoint: a private or fake endpoint says nothing about the path to the instances), else
    // nullopt (the caller opens 0.0.0.0/0 with a notice). Returns "a.b.c.d/n" or an IPv6 CIDR.
    std::optional<std::string> ssh_ingress_cidr(bool detect) const {
        if (const char* v = std::getenv("SKY_CLIENT_CIDR"); v && *v) {
            std::string text = trim(v);
            std::string addr = text.substr(0, text.find('/'));
            const bool v6 = addr.find(':') != std::string::npos;
            unsigned char buf[sizeof(in6_addr)];
            int bits = v6 ? 128 : 32;
            bool ok = ::inet_pton(v6 ? AF_INET6 : AF_INET, addr.c_str(), buf) == 1;
            if (ok && text.find('/') != std::string::npos) {
                const std::string len = text.substr(text.find('/') + 1);
                ok = !len.empty() && len.size() <= 3 &&
                     std::all_of(len.begin(), len.end(),
                                 [](char c) { return c >= '0' && c <= '9'; });
                if (ok) {
                    const int n = std::stoi(len);
                    ok = n >= 0 && n <= bits;
                    bits = n;
                }
            }
            if (!ok)
                throw ConfigError("SKY_CLIENT_CIDR: \"" + text +
                                  "\" is not an address or CIDR (e.g. 203.0.113.7/32)");
            return addr + "/" + std::to_string(bits);
        }
        if (!detect || client_->custom_endpoint()) return std::nullopt;
        try {
            HttpOptions o;
            o.connect_timeout = std::chrono::seconds(3);
            o.attempt_timeout = std::chrono::seconds(5);
            o.retry.max_attempts = 2;
            o.max_body_bytes = 256;
            std::string ip =
                trim(http_send({.method = "GET", .url = "https://checkip.amazonaws.com/"}, o).body);
            in_addr a{};
            if (::inet_pton(AF_INET, ip.c_str(), &a) == 1) return ip + "/32";
        } catch (const std::exception&) {
        }
        return std::nullopt;
    }

    void create_infra(const std::function<void(Event)>& emit) {
        std::lock_guard lk(infra_m_);
        if (dir_.empty()) {
            std::string tmpl =
                (std::filesystem::temp_directory_path() / ("sky-aws-" + pool_id_ + "-XXXXXX"))
                    .string();
            if (!::mkdtemp(tmpl.data())) throw ProvisionError("AWS: cannot create a key directory");
            dir_ = tmpl;
            ssh_keygen(dir_ / "key", name_);
        }
        if (!key_imported_) {
            std::string pub = trim(read_text(dir_ / "key.pub"));
            QueryParams p;
            p.set("KeyName", name_);
            p.set("PublicKeyMaterial", aws::base64_encode(pub));
            p.set("TagSpecification.1.ResourceType", "key-pair");
            p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
            p.set("TagSpecification.1.Tag.1.Value", pool_id_);
            try {
                (void)client_->call("ImportKeyPair", p);
            } catch (const HttpError& e) {
                if (e.code() != "InvalidKeyPair.Duplicate")
                    throw provision_error("ImportKeyPair", e);
                // A stale key of the same name (a retried pool id): replace it with ours.
                QueryParams d;
                d.set("KeyName", name_);
                (void)client_->call("DeleteKeyPair", d);
                try {
                    (void)client_->call("ImportKeyPair", p);
                } catch (const HttpError& e2) {
                    throw provision_error("ImportKeyPair", e2);
                }
            }
            key_imported_ = true;
        }
        if (group_id_.empty()) {
            QueryParams p;
            p.set("GroupName", name_);
            p.set("GroupDescription", "sky pool " + pool_id_ + ": SSH only");
            p.set("TagSpecification.1.ResourceType", "security-group");
            p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
            p.set("TagSpecification.1.Tag.1.Value", pool_id_);
            try {
                group_id_ = client_->call("CreateSecurityGroup", p).child_text("groupId");
            } catch (const HttpError& e) {
                if (e.code() != "InvalidGroup.Duplicate")
                    throw provision_error("CreateSecurityGroup", e);
                QueryParams d;
                d.set("Filter.1.Name", "group-name");
                d.set("Filter.1.Value.1", name_);
                json r = client_->call_json("DescribeSecurityGroups", d);
                for (const auto& g : list_of(r, "securityGroupInfo"))
                    group_id_ = str_of(g, "groupId");
            }
            if (group_id_.empty()) throw ProvisionError("AWS: CreateSecurityGroup returned no id");
            // Port 22 only: the worker is reached through the SSH tunnel, never directly. And
            // only from this client where its address is known.
            std::optional<std::string> cidr = ssh_ingress_cidr(/*detect=*/true);
            if (!cidr) {
                const std::string text =
                    "AWS: notice: SSH (port 22) of this pool's instances is open to 0.0.0.0/0, "
                    "since this client's public address is unknown; set SKY_CLIENT_CIDR (e.g. "
                    "203.0.113.7/32) to allow only it";
                std::fprintf(stderr, "sky: %s\n", text.substr(std::string("AWS: ").size()).c_str());
                emit(ErrorEvent{text, std::nullopt});
            }
            QueryParams a;
            a.set("GroupId", group_id_);
            a.set("IpPermissions.1.IpProtocol", "tcp");
            a.set("IpPermissions.1.FromPort", 22);
            a.set("IpPermissions.1.ToPort", 22);
            if (cidr && cidr->find(':') != std::string::npos) {
                a.set("IpPermissions.1.Ipv6Ranges.1.CidrIpv6", *cidr);
            } else {
                a.set("IpPermissions.1.IpRanges.1.CidrIp", cidr.value_or("0.0.0.0/0"));
            }
            try {
                (void)client_->call("AuthorizeSecurityGroupIngress", a);
            } catch (const HttpError& e) {
                if (e.code() != "InvalidPermission.Duplicate")
                    throw provision_error("AuthorizeSecurityGroupIngress", e);
            }
        }
    }

    ProvisionError provision_error(const std::string& action, const std::exception& e) const {
        return ProvisionError(fmt::format("AWS {} failed: {}", action, error_text(e)));
    }

    // Deep Learning Base GPU AMI for accelerator types, Ubuntu otherwise; the newest.
    std::string image_for(const Offer& offer) {
        const bool gpu = !offer.accelerator.empty();
        std::lock_guard lk(infra_m_);
        std::string& cached = gpu ? gpu_ami_ : cpu_ami_;
        if (!cached.empty()) return cached;
        QueryParams p;
        if (gpu) {
            p.set("Owner.1", "amazon");
            p.set("Filter.1.Name", "name");
            p.set("Filter.1.Value.1", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu *) *");
        } else {
            p.set("Owner.1", "099720109477");  // Canonical
            p.set("Filter.1.Name", "name");
            p.set("Filter.1.Value.1", "ubuntu/images/hvm-ssd*/ubuntu-*-amd64-server-*");
        }
        p.set("Filter.2.Name", "state");
        p.set("Filter.2.Value.1", "available");
        p.set("Filter.3.Name", "architecture");
        p.set("Filter.3.Value.1", "x86_64");
        json r;
        try {
            r = client_->call_json("DescribeImages", p);
        } catch (const std::exception& e) {
            throw provision_error("DescribeImages", e);
        }
        std::string best, best_date;
        for (const auto& img : list_of(r, "imagesSet")) {
            std::string date = str_of(img, "creationDate");
            if (best.empty() || date > best_date) {
                best = str_of(img, "imageId");
                best_date = date;
            }
        }
        if (best.empty()) {
            throw ProvisionError(fmt::format("AWS: no {} image found in {}",
                                             gpu ? "Deep Learning Base GPU" : "Ubuntu",
                                             client_->region()));
        }
        cached = best;
        return best;
    }

    // The candidates' facts as EC2 describes them today (DescribeInstanceTypes): vCPUs, memory,
    // accelerators and whether a spot market exists, named and sized as the catalog names them.
    // They replace the catalog's facts; the catalog's prices stay. The candidates are the catalog's
    // rows that could serve the request by shape alone (any accelerator count or memory of the
    // asked model), so live facts can both add and remove a match. A failure leaves the catalog's
    // facts in place.
    std::vector<Offer> live_instance_types(const Catalog& catalog, SelectionRequest req,
                                           const std::function<void(Event)>& emit) {
        req.spot = Spot::Never{};
        if (!req.machine && req.accelerator) {
            Accelerator loose;
            loose.name = req.accelerator->name;  // any count, any memory variant
            req.accelerator = loose;
            req.cpu.reset();
            req.memory.reset();
        }
        std::vector<Offer> candidates = catalog.select(req, "aws");
        if (candidates.empty()) return {};
        std::vector<std::string> types;
        for (const auto& o : candidates)
            if (std::find(types.begin(), types.end(), o.instance_type) == types.end() &&
                types.size() < 100)
                types.push_back(o.instance_type);
        std::map<std::string, json> described;
        try {
            std::string token;
            for (int page = 0; page < 20; ++page) {  // 100 types a page: 1 or 2 pages
                QueryParams p;
                // A filter, not InstanceType.N: a type this region lacks is then left out
                // instead of failing the whole call (InvalidInstanceType).
                p.set("Filter.1.Name", "instance-type");
                p.set_list("Filter.1.Value", types);
                p.set("MaxResults", "100");
                if (!token.empty()) p.set("NextToken", token);
                json r = client_->call_json("DescribeInstanceTypes", p);
                for (const auto& info : list_of(r, "instanceTypeSet")) {
                    std::string type = str_of(info, "instanceType");
                    if (!type.empty()) described[type] = info;
                }
                token = str_of(r, "nextToken");
                if (token.empty()) break;
            }
        } catch (const std::exception& e) {
            emit(ErrorEvent{
                std::string("AWS: instance types unavailable, using the catalog's facts: ") +
                    e.what(),
                std::nullopt});
            return {};
        }
        std::vector<Offer> live;
        for (auto o : candidates) {
            auto it = described.find(o.instance_type);
            if (it == described.end()) continue;
            try {
                apply_instance_type(it->second, o);
            } catch (const std::exception& e) {
                emit(ErrorEvent{fmt::format("AWS: instance type {} not understood, using the "
                                            "catalog's facts: {}",
                                            o.instance_type, e.what()),
                                std::nullopt});
                continue;
            }
            live.push_back(std::move(o));
        }
        return live;
    }

    // One InstanceTypeInfo (xml_to_json of EC2's answer) over a catalog offer's facts. An
    // accelerator the catalog does not know by name leaves the offer's accelerator as it is.
    static void apply_instance_type(const json& info, Offer& o) {
        auto number = [](const json& j, const char* key) -> std::optional<double> {
            std::string text = str_of(j, key);
            if (text.empty()) return std::nullopt;
            return std::stod(text);
        };
        if (info.contains("vCpuInfo"))
            if (auto v = number(info["vCpuInfo"], "defaultVCpus")) o.vcpus = static_cast<int>(*v);
        if (info.contains("memoryInfo"))
            if (auto mib = number(info["memoryInfo"], "sizeInMiB")) o.memory_gb = *mib / 1024.0;
        if (info.contains("supportedUsageClasses") && info["supportedUsageClasses"].is_array()) {
            const json& classes = info["supportedUsageClasses"];
            o.spot_available = std::find(classes.begin(), classes.end(), "spot") != classes.end();
            if (!o.spot_available) o.spot_price.reset();
        }
        // The device list: GPUs, else Neuron devices (Inferentia, Trainium).
        const json* devices = nullptr;
        if (info.contains("gpuInfo")) {
            devices = &list_of(info["gpuInfo"], "gpus");
        } else if (info.contains("neuronInfo")) {
            devices = &list_of(info["neuronInfo"], "neuronDevices");
        }
        if (!devices || devices->empty()) return;
        const json& d = devices->front();
        const std::string name = str_of(d, "name");
        const int count = static_cast<int>(number(d, "count").value_or(0));
        const double mib =
            d.contains("memoryInfo") ? number(d["memoryInfo"], "sizeInMiB").value_or(0) : 0;
        std::optional<Accelerator> acc = accelerator_from_device_name(name, mib, count);
        if (!acc) {
            if (auto canonical = canonical_accelerator_name(name)) {
                acc = Accelerator{};
                acc->name = *canonical;
            }
        }
        if (!acc || count < 1) return;
        o.accelerator = acc->name;
        o.accelerator_count = count;
        if (mib > 0) {
            // The catalog keeps the marketed size (A10G: 24 GB; EC2 says 22888 MiB): the nearest
            // size the model is sold in when EC2's figure is within 10% of it, else EC2's.
            const double gib = mib / 1024.0;
            double best = 0;
            for (int v : accelerator_info(acc->name).memory_gb)
                if (best == 0 || std::fabs(v - gib) < std::fabs(best - gib)) best = v;
            o.gpu_memory_gb =
                best > 0 && std::fabs(best - gib) / best <= 0.10 ? best : std::round(gib);
        }
    }

    // Today's spot prices for the instance types that could serve the request: the newest price
    // per type, the cheapest zone. They replace the catalog's (dated) spot prices, so the offers
    // are ranked by what spot costs now. A failure leaves the catalog's prices in place.
    std::vector<Offer> live_spot_prices(const Catalog& catalog, SelectionRequest req,
                                        const std::function<void(Event)>& emit) {
        req.spot = Spot::Never{};  // every candidate, whatever its spot price
        std::vector<Offer> candidates = catalog.select(req, "aws");
        if (candidates.empty()) return {};
        QueryParams p;
        std::vector<std::string> types;
        for (const auto& o : candidates)
            if (std::find(types.begin(), types.end(), o.instance_type) == types.end() &&
                types.size() < 100)
                types.push_back(o.instance_type);
        p.set_list("InstanceType", types);
        p.set("ProductDescription.1", "Linux/UNIX");
        const double now_s =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        p.set("StartTime", aws::format_iso8601(now_s));
        std::map<std::string, double> best;
        try {
            json r = client_->call_json("DescribeSpotPriceHistory", p);
            for (const auto& item : list_of(r, "spotPriceHistorySet")) {
                std::string type = str_of(item, "instanceType");
                double price = std::stod(str_of(item, "spotPrice"));
                auto it = best.find(type);
                if (it == best.end() || price < it->second) best[type] = price;
            }
        } catch (const std::exception& e) {
            emit(ErrorEvent{
                std::string("AWS: spot prices unavailable, using the catalog's: ") + e.what(),
                std::nullopt});
            return {};
        }
        std::vector<Offer> live;
        const std::string today = aws::format_iso8601(now_s).substr(0, 10);
        for (auto o : candidates) {
            auto it = best.find(o.instance_type);
            if (it == best.end()) continue;
            o.spot_price = it->second;
            o.spot_available = true;
            o.prices_date = today;
            live.push_back(std::move(o));
        }
        return live;
    }

    // Replaces the host key the node got in its user-data (readable there through the instance
    // metadata, and by anyone in the account allowed DescribeInstanceAttribute) with one made on
    // the node. Over a session that pins the user-data key, a root script finds the sshd serving
    // it, generates a fresh ed25519 key, moves it over the host key file that sshd loads (the one
    // whose public half is the pinned key), removes cloud-init's copies of the user-data, prints
    // the new public key and makes sshd load it (SIGHUP: sshd re-executes itself; this session
    // stays up). The new key arrives over the authenticated, pinned session, so pinning it is no
    // trust on first use. A node where this fails keeps the user-data key, with an ErrorEvent.
    // Throws what ssh::Session throws while connecting (the caller retries while the node boots).
    void rotate_host_key(AwsNode& n, const std::function<void(Event)>& emit) {
        std::istringstream words(n.host_public_key);
        std::string type, blob;
        words >> type >> blob;
        ssh::SessionOptions o;
        o.host = n.public_ip;
        o.port = 22;
        o.user = ssh_user_;
        o.private_key_file = dir_ / "key";
        o.host_key = ssh::HostKeyPin::public_key(n.host_public_key);
        o.connect_timeout = std::chrono::seconds(15);
        o.connect_attempts = 3;
        o.retry_auth_failure = true;  // authorized_keys may not be written yet
        ssh::Session session(o);
        const std::string script = fmt::format(
            "set -eu\n"
            "umask 077\n"
            "old_blob='{blob}'\n"
            "# The sshd serving this session: the outermost sshd among this shell's ancestors.\n"
            "p=$$ listener=\n"
            "while [ \"$p\" -gt 1 ] 2>/dev/null; do\n"
            "  [ \"$(sed -n 's/^Name:[[:space:]]*//p' /proc/$p/status)\" = sshd ] && listener=$p\n"
            "  p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status)\n"
            "done\n"
            "[ -n \"$listener\" ] || {{ echo 'no sshd among the session ancestors' >&2; exit 3; "
            "}}\n"
            "cfg=/etc/ssh/sshd_config\n"
            "set -- $(tr '\\0' ' ' < /proc/$listener/cmdline)\n"
            "while [ $# -gt 1 ]; do [ \"$1\" = -f ] && cfg=$2; shift; done\n"
            "key=\n"
            "for k in $(sshd -T -f \"$cfg\" 2>/dev/null | awk '$1==\"hostkey\"{{print $2}}') "
            "/etc/ssh/ssh_host_ed25519_key; do\n"
            "  [ -f \"$k\" ] || continue\n"
            "  if [ \"$(ssh-keygen -y -f \"$k\" 2>/dev/null | awk '{{print $2}}')\" = "
            "\"$old_blob\" ]; "
            "then key=$k; break; fi\n"
            "done\n"
            "[ -n \"$key\" ] || {{ echo 'sshd loads no file with the pinned key' >&2; exit 4; }}\n"
            "tmp=$(mktemp -d \"$(dirname \"$key\")/.sky-hostkey.XXXXXX\")\n"
            "ssh-keygen -q -t ed25519 -N '' -C sky-host -f \"$tmp/key\" </dev/null >/dev/null\n"
            "chmod 600 \"$tmp/key\"\n"
            "chmod 644 \"$tmp/key.pub\"\n"
            "mv -f \"$tmp/key.pub\" \"$key.pub\"\n"
            "mv -f \"$tmp/key\" \"$key\"\n"
            "rmdir \"$tmp\"\n"
            "# cloud-init's copies of the user-data: the key in them is dead now; drop them "
            "anyway.\n"
            "rm -f /var/lib/cloud/instance/user-data.txt /var/lib/cloud/instance/user-data.txt.i "
            "/var/lib/cloud/instance/scripts/part-001 2>/dev/null || true\n"
            "cat \"$key.pub\"\n"
            "kill -HUP \"$listener\"\n"
            "sleep 1  # sshd re-executes; the next connection then sees the new key\n",
            fmt::arg("blob", blob));
        std::string failure;
        std::string fresh;
        try {
            ssh::ExecOptions eo;
            eo.stdin_data = script;
            eo.timeout = std::chrono::seconds(60);
            ssh::ExecResult r = session.exec(
                "if [ \"$(id -u)\" = 0 ]; then exec bash -s; else exec sudo -n bash -s; fi", eo);
            std::istringstream out(r.out);
            for (std::string line; std::getline(out, line);)
                if (line.rfind("ssh-ed25519 ", 0) == 0) fresh = trim(line);
            if (r.exit_status != 0) {
                std::string err = trim(r.err);
                if (auto nl = err.rfind('\n'); nl != std::string::npos) err = err.substr(nl + 1);
                failure = fmt::format("exit status {}: {}", r.exit_status, err.substr(0, 200));
            } else if (fresh.empty()) {
                failure = "no new public key came back";
            } else {
                std::istringstream fw(fresh);
                std::string fresh_type, fresh_blob;
                fw >> fresh_type >> fresh_blob;
                (void)ssh::fingerprint_of_public_key(fresh);  // throws when it does not parse
                if (fresh_blob == blob) failure = "the node presented the same key again";
            }
        } catch (const std::exception& e) {
            failure = e.what();
        }
        n.host_key_rotated = true;
        if (!failure.empty()) {
            emit(ErrorEvent{fmt::format("AWS: host key of {} not rotated ({}); the node keeps the "
                                        "key from its user-data",
                                        n.instance_id, failure),
                            n.instance_id});
            return;
        }
        n.host_public_key = fresh;
    }

    // How a spot node learns it is being reclaimed: the instance metadata's
    // spot/instance-action (IMDSv2) answers 200 about two minutes before. Only on machines our
    // own user-data marked (never a test host or anyone else's machine); SKY_AWS_PREEMPTION_PROBE
    // replaces the command (the project's tests use a file on the test host).
    static std::string preemption_probe() {
        if (const char* p = std::getenv("SKY_AWS_PREEMPTION_PROBE"); p && *p) return p;
        return "[ -f /etc/sky/power-off-on-expiry ] && "
               "t=$(curl -s -m 2 -X PUT http://169.254.169.254/latest/api/token "
               "-H 'X-aws-ec2-metadata-token-ttl-seconds: 60') && "
               "curl -s -f -m 2 -H \"X-aws-ec2-metadata-token: $t\" "
               "http://169.254.169.254/latest/meta-data/spot/instance-action";
    }

    // The user-data of one node: installs the host key generated here (and pinned by the
    // client), offers only it, restarts sshd, and arms a power-off at the pool's hard timeout in
    // case the client never reaches the node (shutdown terminates the instance).
    std::string user_data(const std::string& host_private, const std::string& host_public) const {
        const long minutes =
            std::max<long>(5, static_cast<long>((spec_.timeout.count() + 59) / 60) + 10);
        return fmt::format(
            "#!/bin/bash\n"
            "# sky pool {pool}: host key pinned by the client; SSH only.\n"
            "set -u\n"
            "umask 077\n"
            "cat > /etc/ssh/ssh_host_ed25519_key <<'SKY_HOST_KEY'\n"
            "{priv}\n"
            "SKY_HOST_KEY\n"
            "cat > /etc/ssh/ssh_host_ed25519_key.pub <<'SKY_HOST_PUB'\n"
            "{pub}\n"
            "SKY_HOST_PUB\n"
            "chmod 600 /etc/ssh/ssh_host_ed25519_key\n"
            "chmod 644 /etc/ssh/ssh_host_ed25519_key.pub\n"
            "mkdir -p /etc/ssh/sshd_config.d\n"
            "printf 'HostKey /etc/ssh/ssh_host_ed25519_key\\n' > "
            "/etc/ssh/sshd_config.d/00-sky-hostkey.conf\n"
            "systemctl restart ssh 2>/dev/null || systemctl restart sshd 2>/dev/null || "
            "service ssh restart\n"
            "shutdown -h +{minutes} 'sky: pool hard timeout' 2>/dev/null || true\n"
            "# The node's watchdog may power this machine off only where this marker exists.\n"
            "mkdir -p /etc/sky && touch /etc/sky/power-off-on-expiry\n"
            "# This script holds the host key; the client replaces that key after its first\n"
            "# connection. Drop this copy of it now (cloud-init's own copies go then).\n"
            "rm -f -- \"$0\" 2>/dev/null || true\n",
            fmt::arg("pool", pool_id_), fmt::arg("priv", trim(host_private)),
            fmt::arg("pub", trim(host_public)), fmt::arg("minutes", minutes));
    }

    // Launches `count` instances of one offer in one call (all or nothing); returns their ids.
    // Throws HttpError (the caller decides whether it is a capacity error).
    std::vector<std::string> run_instances(const Offer& offer, int count, bool spot,
                                           const std::string& token,
                                           const std::vector<std::string>& data) {
        const std::string ami = image_for(offer);
        // One node per call (count 1 from try_offer): each user-data carries its node's host key.
        QueryParams p;
        p.set("ImageId", ami);
        p.set("InstanceType", offer.instance_type);
        p.set("MinCount", count);
        p.set("MaxCount", count);
        p.set("KeyName", name_);
        p.set("SecurityGroupId.1", group_id_);
        p.set("ClientToken", token.substr(0, 64));
        p.set("InstanceInitiatedShutdownBehavior", "terminate");
        // IMDSv2 only, one hop: a container or a forwarded request on the node cannot read the
        // metadata (user-data included) with a plain GET.
        p.set("MetadataOptions.HttpTokens", "required");
        p.set("MetadataOptions.HttpPutResponseHopLimit", 1);
        p.set("MetadataOptions.HttpEndpoint", "enabled");
        p.set("UserData", aws::base64_encode(data.at(0)));
        p.set("TagSpecification.1.ResourceType", "instance");
        p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
        p.set("TagSpecification.1.Tag.1.Value", pool_id_);
        p.set("TagSpecification.1.Tag.2.Key", "Name");
        p.set("TagSpecification.1.Tag.2.Value", name_);
        if (spot) {
            p.set("InstanceMarketOptions.MarketType", "spot");
            p.set("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
            p.set("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate");
        }
        json r = client_->call_json("RunInstances", p);
        std::vector<std::string> ids;
        for (const auto& inst : list_of(r, "instancesSet"))
            ids.push_back(str_of(inst, "instanceId"));
        {
            std::lock_guard lk(m_);
            for (auto& id : ids) launched_.push_back(id);
        }
        if (static_cast<int>(ids.size()) != count) {
            throw ProvisionError(
                fmt::format("AWS RunInstances started {} of {} instances", ids.size(), count));
        }
        return ids;
    }

    // One offer: the spot share and the on-demand share, each launched in one call per node (each
    // node gets its own host key). On failure everything this offer started is terminated.
    bool try_offer(const Offer& offer, int nodes, int want_spot, bool fallback,
                   const std::string& token_base, std::vector<ProvisionAttempt>& attempts,
                   const std::function<void(Event)>& emit) {
        std::vector<AwsNode> started;
        auto give_up = [&](bool spot, const std::string& err) {
            attempts.push_back({"aws", offer.instance_type, client_->region(), spot, err});
            std::vector<std::string> ids;
            for (auto& n : started) ids.push_back(n.instance_id);
            terminate(ids);
        };
        for (int node = 0; node < nodes; ++node) {
            bool spot = node < want_spot && offer.spot_available;
            if (node < want_spot && !offer.spot_available && !fallback) {
                give_up(true, "no spot market for this instance type");
                return false;
            }
            // The node's host key: generated here, installed by user-data, pinned by connect().
            auto key = dir_ / fmt::format("host{}", node);
            ssh_keygen(key, "sky-host");
            std::string priv = read_text(key), pub = trim(read_text(key.string() + ".pub"));
            std::error_code ec;
            std::filesystem::remove(key, ec);  // the private half lives only in the user-data
            const std::string data = user_data(priv, pub);
            std::vector<std::string> ids;
            for (int tries = 0; tries < 2; ++tries) {
                try {
                    ids = run_instances(offer, 1, spot,
                                        fmt::format("{}-{}{}", token_base, node, spot ? "s" : "d"),
                                        {data});
                    break;
                } catch (const HttpError& e) {
                    const std::string code = e.code();
                    if (is_capacity_error(code) && spot && fallback) {
                        // IfAvailable: this node goes on-demand on the same offer.
                        attempts.push_back(
                            {"aws", offer.instance_type, client_->region(), true, error_text(e)});
                        spot = false;
                        continue;
                    }
                    give_up(spot, error_text(e));
                    if (is_capacity_error(code)) return false;
                    throw ProvisionError(fmt::format("AWS RunInstances failed for {}: {}",
                                                     offer.instance_type, error_text(e)),
                                         attempts);
                } catch (const ProvisionError& e) {
                    give_up(spot, e.what());
                    throw ProvisionError(e.what(), attempts);
                }
            }
            if (ids.empty()) {
                give_up(spot, "no instance started");
                return false;
            }
            AwsNode n;
            n.instance_id = ids[0];
            n.offer = offer;
            n.spot = spot;
            n.host_public_key = pub;
            started.push_back(std::move(n));
        }
        std::string err;
        if (!wait_running(started, err)) {
            give_up(want_spot > 0, err);
            return false;
        }
        {
            std::lock_guard lk(m_);
            nodes_ = std::move(started);
        }
        for (int node = 0; node < nodes; ++node) {
            const AwsNode& n = nodes_[static_cast<std::size_t>(node)];
            std::optional<double> spot_price;
            if (n.spot) spot_price = n.offer.hourly_price(true);
            emit(InstanceProvisioned{n.instance_id, node, n.spot, "aws", n.public_ip,
                                     n.offer.instance_type, n.offer.on_demand_price, spot_price});
        }
        return true;
    }

    // Bounded polling until every node runs with a public address.
    bool wait_running(std::vector<AwsNode>& ns, std::string& err) {
        auto until = Clock::now() + std::chrono::minutes(10);
        auto pause = std::chrono::milliseconds(200);
        for (int poll = 0; poll < 300 && Clock::now() < until; ++poll) {
            QueryParams p;
            for (std::size_t i = 0; i < ns.size(); ++i)
                p.set(fmt::format("InstanceId.{}", i + 1), ns[i].instance_id);
            json r;
            try {
                r = client_->call_json("DescribeInstances", p);
            } catch (const HttpError& e) {
                // Eventual consistency: a new id may not be visible yet.
                if (e.code() != "InvalidInstanceID.NotFound") {
                    err = "DescribeInstances: " + error_text(e);
                    return false;
                }
            }
            std::size_t ready = 0;
            for (const auto& res : list_of(r, "reservationSet")) {
                for (const auto& inst : list_of(res, "instancesSet")) {
                    std::string id = str_of(inst, "instanceId");
                    auto it = std::find_if(ns.begin(), ns.end(),
                                           [&](const AwsNode& n) { return n.instance_id == id; });
                    if (it == ns.end()) continue;
                    std::string state =
                        inst.contains("instanceState") ? str_of(inst["instanceState"], "name") : "";
                    if (state == "shutting-down" || state == "terminated" || state == "stopped") {
                        std::string reason = inst.contains("stateReason")
                                                 ? str_of(inst["stateReason"], "message")
                                                 : state;
                        err = fmt::format("instance {} ended while starting: {}", id, reason);
                        return false;
                    }
                    it->public_ip = str_of(inst, "ipAddress");
                    it->private_ip = str_of(inst, "privateIpAddress");
                    if (state == "running" && !it->public_ip.empty()) ++ready;
                }
            }
            if (ready == ns.size()) return true;
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(5000));
        }
        err = "instances not running with a public address within 10 minutes";
        return false;
    }

    // Instances tagged sky:pool=<this pool> that are not terminated (best effort: empty on error).
    std::vector<std::string> tagged_live_instances() noexcept {
        std::vector<std::string> ids;
        try {
            QueryParams p;
            p.set("Filter.1.Name", "tag:sky:pool");
            p.set("Filter.1.Value.1", pool_id_);
            p.set("Filter.2.Name", "instance-state-name");
            p.set_list("Filter.2.Value", {"pending", "running", "stopping", "stopped"});
            json r = client_->call_json("DescribeInstances", p);
            for (const auto& res : list_of(r, "reservationSet"))
                for (const auto& inst : list_of(res, "instancesSet"))
                    ids.push_back(str_of(inst, "instanceId"));
        } catch (...) {
        }
        return ids;
    }

    // TerminateInstances, then DescribeInstances until all are terminated (bounded). "Already
    // gone" is success. Never throws.
    void terminate(std::vector<std::string> ids) noexcept {
        {
            // Confirmed terminated earlier: a second stop_all() costs no call.
            std::lock_guard lk(m_);
            std::erase_if(ids, [&](const std::string& id) { return terminated_.count(id) > 0; });
        }
        if (ids.empty()) return;
        auto confirmed = [&] {
            std::lock_guard lk(m_);
            for (const auto& id : ids) terminated_.insert(id);
        };
        try {
            auto call = [&](const std::vector<std::string>& some) {
                QueryParams p;
                for (std::size_t i = 0; i < some.size(); ++i)
                    p.set(fmt::format("InstanceId.{}", i + 1), some[i]);
                (void)client_->call("TerminateInstances", p);
            };
            try {
                call(ids);
            } catch (const HttpError& e) {
                if (!is_not_found(e.code())) throw;
                // One unknown id fails the whole call: retry one by one.
                for (const auto& id : ids) {
                    try {
                        call({id});
                    } catch (const HttpError& e1) {
                        if (!is_not_found(e1.code())) throw;
                    }
                }
            }
            auto until = Clock::now() + std::chrono::minutes(5);
            auto pause = std::chrono::milliseconds(200);
            for (int poll = 0; poll < 200 && Clock::now() < until; ++poll) {
                QueryParams p;
                for (std::size_t i = 0; i < ids.size(); ++i)
                    p.set(fmt::format("InstanceId.{}", i + 1), ids[i]);
                json r;
                try {
                    r = client_->call_json("DescribeInstances", p);
                } catch (const HttpError& e) {
                    if (is_not_found(e.code())) {  // gone from the API entirely
                        confirmed();
                        return;
                    }
                    throw;
                }
                bool all_gone = true;
                for (const auto& res : list_of(r, "reservationSet")) {
                    for (const auto& inst : list_of(res, "instancesSet")) {
                        std::string state = inst.contains("instanceState")
                                                ? str_of(inst["instanceState"], "name")
                                                : "";
                        if (state != "terminated") all_gone = false;
                    }
                }
                if (all_gone) {
                    confirmed();
                    return;
                }
                std::this_thread::sleep_for(pause);
                pause = std::min(pause * 2, std::chrono::milliseconds(5000));
            }
        } catch (...) {
            // Best effort: the instances carry the sky:pool tag for `sky ls --provider aws`, and
            // their watchdog or the user-data's timer powers them off.
        }
    }

    void delete_infra() noexcept {
        std::lock_guard lk(infra_m_);
        if (key_imported_) {
            try {
                QueryParams p;
                p.set("KeyName", name_);
                (void)client_->call("DeleteKeyPair", p);
                key_imported_ = false;
            } catch (const HttpError& e) {
                if (is_not_found(e.code())) key_imported_ = false;
            } catch (...) {
            }
        }
        if (!group_id_.empty()) {
            // Best effort: EC2 refuses (DependencyViolation) while an instance still uses it.
            try {
                QueryParams p;
                p.set("GroupId", group_id_);
                (void)client_->call("DeleteSecurityGroup", p);
                group_id_.clear();
            } catch (const HttpError& e) {
                if (is_not_found(e.code())) group_id_.clear();
            } catch (...) {
            }
        }
        if (!dir_.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(dir_, ec);
            dir_.clear();
        }
    }

    PoolSpec spec_;
    AWS cfg_;
    std::string pool_id_;
    std::string name_;  // "sky-<pool id>": key pair, security group, Name tag
    std::string ssh_user_;
    std::chrono::seconds boot_wait_{300};
    std::unique_ptr<aws::Ec2Client> client_;

    std::mutex infra_m_;  // guards the key pair, group, images and key directory
    std::filesystem::path dir_;
    bool key_imported_ = false;
    std::string group_id_;
    std::string gpu_ami_, cpu_ami_;

    mutable std::mutex m_;
    std::shared_ptr<ship::PoolShipment> shipment_;
    std::shared_ptr<ship::PoolShipment> shipment() {
        std::lock_guard lk(m_);
        if (!shipment_) shipment_ = std::make_shared<ship::PoolShipment>(ship::this_program());
        return shipment_;
    }
    std::vector<AwsNode> nodes_;
    std::vector<std::string> launched_;  // every id RunInstances returned, until terminated
    std::set<std::string> terminated_;   // confirmed terminated
};

}  // namespace

std::unique_ptr<Backend> make_aws_backend(const PoolSpec& spec, const std::string& pool_id) {
    return std::make_unique<AwsBackend>(spec, pool_id);
}

}  // namespace sky::detail
