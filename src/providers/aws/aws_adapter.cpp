// sky::AWS as a cloud adapter: EC2's Query API for what the cloud layer asks (offers from
// DescribeInstanceTypes and DescribeSpotPriceHistory, a key pair and a security group, RunInstances
// with the boot script as user data, DescribeInstances, TerminateInstances, the sweep by the
// sky:pool tag). Everything else of a pool's life is the cloud layer's (providers/cloud).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "aws/ec2_client.hpp"
#include "aws/xml.hpp"
#include "catalog/names.hpp"
#include "http/client_address.hpp"
#include "http/endpoint.hpp"
#include "providers/aws/provider.hpp"
#include "providers/aws/scripts.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/cloud/collect.hpp"
#include "providers/cloud/refusal.hpp"
#include "sky/catalog.hpp"
#include "sky/cloud.hpp"
#include "sky/providers.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using aws::list_of;
using aws::str_of;
using nlohmann::json;
using QueryParams = aws::QueryParams;

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
                                                "InsufficientFreeAddressesInSubnet"};
    return codes.count(code) > 0;
}

// Answers that mean "this instance type is not sold here": the next offer, never the same type
// on demand after spot. ("Unsupported": the type is not offered in the zone or region.)
bool is_unknown_type_error(const HttpError& e) {
    if (e.code() == "Unsupported" || e.code() == "InvalidInstanceType") return true;
    return e.code() == "InvalidParameterValue" &&
           to_lower(e.provider_message()).find("instancetype") != std::string::npos;
}

bool is_not_found(const std::string& code) {
    return code.find("NotFound") != std::string::npos || code == "InvalidGroup.NotFound";
}

// The status the cloud layer judges a refusal by: EC2 answers RequestExpired (a signature whose
// date the service no longer accepts) with 400, and asking again from the same clock gets it
// again, so it counts as refused credentials like AuthFailure's 401.
long refusal_status(const std::exception& e) {
    const auto* h = dynamic_cast<const HttpError*>(&e);
    if (!h) return 0;
    return h->code() == "RequestExpired" ? 401 : h->status();
}

std::string error_text(const std::exception& e) {
    if (auto* h = dynamic_cast<const HttpError*>(&e)) {
        if (!h->code().empty()) return h->code() + ": " + h->provider_message();
    }
    return e.what();
}

// One instance of DescribeInstances' answer (xml_to_json) as the cloud layer sees it.
CloudInstance instance_from(const json& inst) {
    CloudInstance i;
    i.id = str_of(inst, "instanceId");
    const std::string state =
        inst.contains("instanceState") ? str_of(inst["instanceState"], "name") : "";
    if (state == "pending")
        i.state = CloudInstance::State::pending;
    else if (state == "running")
        i.state = CloudInstance::State::running;
    else if (state == "terminated")
        i.state = CloudInstance::State::gone;
    else
        i.state = CloudInstance::State::stopping;  // shutting-down, stopping, stopped
    i.public_ip = str_of(inst, "ipAddress");
    i.private_ip = str_of(inst, "privateIpAddress");
    i.spot = str_of(inst, "instanceLifecycle") == "spot";
    i.instance_type = str_of(inst, "instanceType");
    i.launched = str_of(inst, "launchTime");
    if (inst.contains("stateReason")) {
        const std::string code = str_of(inst["stateReason"], "code");
        i.preempted = code == "Server.SpotInstanceTermination";
        i.reason = str_of(inst["stateReason"], "message");
        if (i.reason.empty()) i.reason = code;
    }
    if (i.reason.empty() && i.state != CloudInstance::State::running &&
        i.state != CloudInstance::State::pending)
        i.reason = state;
    for (const auto& tag : list_of(inst, "tagSet"))
        if (str_of(tag, "key") == "sky:pool") i.pool_id = str_of(tag, "value");
    return i;
}

aws::Ec2ClientConfig client_config(const AWS& cfg) {
    auto credentials = aws::load_default_credentials(cfg.profile);
    if (!credentials) {
        throw ConfigError(
            "AWS: no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
            "AWS_SESSION_TOKEN for temporary ones), or configure ~/.aws/credentials (profile " +
            (cfg.profile.empty() ? env_or("AWS_PROFILE", "default") : cfg.profile) + ")");
    }
    aws::Ec2ClientConfig cc;
    cc.region = cfg.region.empty() ? "us-east-1" : cfg.region;
    const aws::EndpointChoice endpoint = aws::choose_endpoint(cfg.endpoint);
    cc.endpoint = endpoint.url;
    cc.endpoint_source = endpoint.source;
    cc.credentials = *credentials;
    // EC2 answers capacity errors with HTTP 500: retry by error code only (throttling,
    // InternalError, Unavailable), so a capacity error moves to the next offer at once.
    cc.http.retry.retry_on_server_errors = false;
    return cc;
}

class Ec2Adapter final : public CloudAdapter {
public:
    explicit Ec2Adapter(const AWS& cfg)
        : client_(std::make_unique<aws::Ec2Client>(client_config(cfg))) {
        ssh_user_ = env_or("SKY_AWS_SSH_USER", "ubuntu");
        // How long a fresh instance may take to present the pinned host key (user-data runs
        // after sshd first starts); a slow image may need more.
        try {
            boot_wait_ = std::chrono::seconds(
                std::clamp(std::stol(env_or("SKY_AWS_BOOT_WAIT_S", "300")), 1L, 3600L));
        } catch (const std::exception&) {
            throw ConfigError("SKY_AWS_BOOT_WAIT_S: expected a number of seconds");
        }
        // How long teardown retries the security group while a terminated instance's network
        // interface still holds it (DependencyViolation), before `sky gc`'s turn.
        try {
            infra_wait_ = std::chrono::seconds(
                std::clamp(std::stol(env_or("SKY_AWS_INFRA_WAIT_S", "120")), 1L, 3600L));
        } catch (const std::exception&) {
            throw ConfigError("SKY_AWS_INFRA_WAIT_S: expected a number of seconds");
        }
        // Checked before anything is created: a malformed value is a ConfigError now.
        (void)ssh_ingress_cidr(/*detect=*/false);
    }

    std::string name() const override { return "aws"; }
    std::string region() const override { return client_->region(); }

    std::vector<Offer> live_offers(const Catalog& catalog, const SelectionRequest& req,
                                   const std::function<void(Event)>& emit) override {
        // A custom endpoint (signatures and user-data go there) was noticed once, on stderr,
        // when the client was made: a notice, not an error in the event stream.
        // Facts first (they may add or remove candidates), then today's spot prices for the
        // candidates as EC2 describes them; only the rows read from EC2 are returned.
        std::vector<Offer> types = live_instance_types(catalog, req, emit);
        Catalog merged = catalog;
        merged.merge(types);
        Catalog live(std::move(types));
        if (wants_spot(req.spot)) live.merge(live_spot_prices(merged, req, emit));
        return live.offers();
    }

    CloudLogin login() const override {
        CloudLogin l;
        l.user = ssh_user_;
        l.preemption_probe = preemption_probe();
        l.power_off_on_expiry = true;  // shutdown terminates (InstanceInitiatedShutdown)
        l.rotate_host_key = true;
        l.boot_wait = boot_wait_;
        l.infra_wait = infra_wait_;
        return l;
    }

    std::string launch(const LaunchRequest& r) override {
        const std::string ami = image_for(r.offer);
        QueryParams p;
        p.set("ImageId", ami);
        p.set("InstanceType", r.offer.instance_type);
        p.set("MinCount", 1);
        p.set("MaxCount", 1);
        p.set("KeyName", r.name);
        {
            std::lock_guard lk(infra_m_);
            p.set("SecurityGroupId.1", group_id_);
        }
        p.set("ClientToken", r.client_token.substr(0, 64));
        p.set("InstanceInitiatedShutdownBehavior", "terminate");
        // IMDSv2 only, one hop: a container or a forwarded request on the node cannot read the
        // metadata (user-data included) with a plain GET.
        p.set("MetadataOptions.HttpTokens", "required");
        p.set("MetadataOptions.HttpPutResponseHopLimit", 1);
        p.set("MetadataOptions.HttpEndpoint", "enabled");
        p.set("UserData", aws::base64_encode(r.boot_script));
        p.set("TagSpecification.1.ResourceType", "instance");
        p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
        p.set("TagSpecification.1.Tag.1.Value", r.pool_id);
        p.set("TagSpecification.1.Tag.2.Key", "Name");
        p.set("TagSpecification.1.Tag.2.Value", r.name);
        if (r.spot) {
            p.set("InstanceMarketOptions.MarketType", "spot");
            p.set("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
            p.set("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate");
        }
        json answer;
        try {
            answer = client_->call_json("RunInstances", p);
        } catch (const HttpError& e) {
            if (is_unknown_type_error(e)) throw UnknownInstanceTypeError(error_text(e));
            if (is_capacity_error(e.code())) throw CapacityError(error_text(e));
            // Still no answer after the client's retries (each with the same ClientToken), or
            // the service failed: the instance may have started.
            if (e.outcome_unknown())
                throw LaunchAnswerLostError("AWS RunInstances: " + error_text(e));
            throw_provision_error("AWS RunInstances: " + error_text(e), refusal_status(e));
        } catch (const aws::XmlError& e) {  // a 2xx that is not EC2's XML: it may have started
            throw LaunchAnswerLostError(e.what());
        }
        std::vector<std::string> ids;
        for (const auto& inst : list_of(answer, "instancesSet"))
            ids.push_back(str_of(inst, "instanceId"));
        if (ids.empty() || (ids.size() == 1 && ids[0].empty()))
            throw LaunchAnswerLostError("AWS RunInstances answered without an instance id");
        if (ids.size() != 1)
            throw ProvisionError(
                fmt::format("AWS RunInstances started {} instances instead of 1", ids.size()));
        return ids[0];
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::vector<CloudInstance> out;
        if (ids.empty()) return out;
        auto call = [&](const std::vector<std::string>& some) {
            QueryParams p;
            for (std::size_t i = 0; i < some.size(); ++i)
                p.set(fmt::format("InstanceId.{}", i + 1), some[i]);
            json r = client_->call_json("DescribeInstances", p);
            for (const auto& res : list_of(r, "reservationSet"))
                for (const auto& inst : list_of(res, "instancesSet"))
                    out.push_back(instance_from(inst));
        };
        try {
            call(ids);
        } catch (const HttpError& e) {
            // One unknown id fails the whole call: ask one by one.
            if (!is_not_found(e.code())) throw;
            out.clear();
            for (const auto& id : ids) {
                try {
                    call({id});
                } catch (const HttpError& e1) {
                    if (!is_not_found(e1.code())) throw;
                }
            }
        }
        for (const auto& id : ids)
            if (std::none_of(out.begin(), out.end(),
                             [&](const CloudInstance& i) { return i.id == id; })) {
                CloudInstance u;
                u.id = id;
                u.state = CloudInstance::State::unknown;
                u.reason = "unknown to EC2";
                out.push_back(std::move(u));
            }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        if (ids.empty()) return;
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
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        return tagged(pool_id, false);
    }

    // The instances tagged with this pool (any sky pool when empty), also the ended ones that
    // EC2 still shows when `include_gone`.
    std::vector<CloudInstance> tagged(std::string_view pool_id, bool include_gone) {
        std::vector<CloudInstance> out;
        std::string token;
        for (int page = 0; page < 100; ++page) {  // bounded pagination
            QueryParams p;
            if (pool_id.empty()) {
                p.set("Filter.1.Name", "tag-key");
                p.set("Filter.1.Value.1", "sky:pool");
            } else {
                p.set("Filter.1.Name", "tag:sky:pool");
                p.set("Filter.1.Value.1", std::string(pool_id));
            }
            if (!include_gone) {
                p.set("Filter.2.Name", "instance-state-name");
                p.set_list("Filter.2.Value",
                           {"pending", "running", "shutting-down", "stopping", "stopped"});
            }
            if (!token.empty()) p.set("NextToken", token);
            json r = client_->call_json("DescribeInstances", p);
            for (const auto& res : list_of(r, "reservationSet"))
                for (const auto& inst : list_of(res, "instancesSet"))
                    out.push_back(instance_from(inst));
            token = r.is_object() ? str_of(r, "nextToken") : std::string();
            if (token.empty()) break;
        }
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        std::lock_guard lk(infra_m_);
        const std::string name = "sky-" + std::string(pool_id);
        // What this adapter saw deleted is not asked for again: with a flaky API (or credentials
        // refused now and then), each repeated request is one more chance of a refusal that
        // makes the round fail and the cloud layer wait for another.
        if (!deleted_.count("key:" + name)) {
            try {
                QueryParams p;
                p.set("KeyName", name);
                (void)client_->call("DeleteKeyPair", p);
                key_imported_ = false;
                why_left_.erase("key:" + name);
                deleted_.insert("key:" + name);
            } catch (const std::exception& e) {
                why_left_["key:" + name] = error_text(e);
            }
        }
        if (deleted_.count("group:" + name)) return;
        // The group by id when this adapter made it, else by its name (`sky gc`). EC2 refuses
        // (DependencyViolation) while an instance, or a terminated instance's network interface,
        // still uses it: the cloud layer calls again with backoff.
        std::vector<std::string> groups;
        bool listed = true;  // `groups` is every group of that name
        if (!group_id_.empty()) {
            groups.push_back(group_id_);
        } else {
            try {
                for (const auto& g : groups_named(name)) groups.push_back(g.first);
            } catch (...) {
                listed = false;
            }
        }
        bool all_gone = listed;
        for (const auto& g : groups) {
            try {
                QueryParams p;
                p.set("GroupId", g);
                (void)client_->call("DeleteSecurityGroup", p);
                if (g == group_id_) group_id_.clear();
                why_left_.erase("group:" + g);
            } catch (const HttpError& e) {
                if (is_not_found(e.code())) {
                    if (g == group_id_) group_id_.clear();
                    why_left_.erase("group:" + g);
                } else {
                    why_left_["group:" + g] = error_text(e);
                    all_gone = false;
                }
            } catch (const std::exception& e) {
                why_left_["group:" + g] = e.what();
                all_gone = false;
            }
        }
        // Group names are unique: once every group of the name is deleted (or was not found),
        // none is left to delete or to look for.
        if (all_gone && !groups.empty()) deleted_.insert("group:" + name);
    }

    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        std::lock_guard lk(infra_m_);
        const std::string name = "sky-" + std::string(pool_id);
        std::vector<std::string> left;
        try {
            auto why = [&](const std::string& key) {
                auto it = why_left_.find(key);
                return it == why_left_.end() ? std::string() : ": " + it->second;
            };
            // EC2 answered each delete that this adapter saw succeed: those are gone.
            if (!deleted_.count("group:" + name))
                for (const auto& [id, group_name] : groups_named(name))
                    left.push_back(fmt::format("security group {} ({}){}", id, group_name,
                                               why("group:" + id)));
            if (!deleted_.count("key:" + name)) {
                QueryParams p;
                p.set("Filter.1.Name", "key-name");
                p.set("Filter.1.Value.1", name);
                json r = client_->call_json("DescribeKeyPairs", p);
                for (const auto& k : list_of(r, "keySet"))
                    if (str_of(k, "keyName") == name)
                        left.push_back(fmt::format("key pair {}{}", name, why("key:" + name)));
            }
        } catch (const std::exception& e) {
            // Unknown: say so rather than claim nothing is left.
            left.push_back(fmt::format("security group and key pair {} (cannot tell: {})", name,
                                       error_text(e)));
        } catch (...) {
        }
        return left;
    }

private:
    // Who may reach port 22: SKY_CLIENT_CIDR when set (validated), else this client's public
    // address as AWS sees it (checkip.amazonaws.com over TLS, only when talking to AWS's own
    // endpoint: a private or fake endpoint says nothing about the path to the instances), else
    // nullopt (the caller opens 0.0.0.0/0 with a notice). Returns "a.b.c.d/n" or an IPv6 CIDR.
    std::optional<std::string> ssh_ingress_cidr(bool detect) const {
        if (auto cidr = client_cidr_from_env()) return cidr;
        if (!detect || client_->custom_endpoint()) return std::nullopt;
        return detect_client_cidr();
    }

    // The pool's key pair (its client key, imported) and a security group that admits SSH from
    // the client and every port from the pool's own members (distributed training).
    void create_infra(const InfraRequest& r, const std::function<void(Event)>&) override {
        std::lock_guard lk(infra_m_);
        const std::string& name_ = r.name;
        const std::string& pool_id_ = r.pool_id;
        deleted_.erase("key:" + name_);  // made again below: deleting it is due again
        deleted_.erase("group:" + name_);
        if (!key_imported_) {
            const std::string& pub = r.ssh_public_key;
            QueryParams p;
            p.set("KeyName", name_);
            p.set("PublicKeyMaterial", aws::base64_encode(pub));
            p.set("TagSpecification.1.ResourceType", "key-pair");
            p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
            p.set("TagSpecification.1.Tag.1.Value", pool_id_);
            // A key of the same name is already there: a stale one of a retried pool id, or ours
            // from an attempt whose answer was lost (the client then tried again). The name
            // holds the pool's random id, so it is replaced with ours; a replacement whose own
            // answer is lost meets its own key the same way, so a few rounds.
            for (int round = 0;; ++round) {
                try {
                    (void)client_->call("ImportKeyPair", p);
                    break;
                } catch (const HttpError& e) {
                    if (e.code() != "InvalidKeyPair.Duplicate" || round == 3)
                        fail("ImportKeyPair", e);
                }
                QueryParams d;
                d.set("KeyName", name_);
                try {
                    (void)client_->call("DeleteKeyPair", d);
                } catch (const HttpError& e) {
                    fail("DeleteKeyPair", e);
                }
            }
            key_imported_ = true;
        }
        if (group_id_.empty()) {
            QueryParams p;
            p.set("GroupName", name_);
            p.set("GroupDescription",
                  "sky pool " + pool_id_ + ": SSH from the client, all ports among the pool");
            p.set("TagSpecification.1.ResourceType", "security-group");
            p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
            p.set("TagSpecification.1.Tag.1.Value", pool_id_);
            try {
                group_id_ = client_->call("CreateSecurityGroup", p).child_text("groupId");
            } catch (const HttpError& e) {
                if (e.code() != "InvalidGroup.Duplicate") fail("CreateSecurityGroup", e);
                for (const auto& g : groups_named(name_)) group_id_ = g.first;
            }
            if (group_id_.empty()) throw ProvisionError("AWS: CreateSecurityGroup returned no id");
            // Port 22 only: the worker is reached through the SSH tunnel, never directly. And
            // only from this client where its address is known.
            std::optional<std::string> cidr = ssh_ingress_cidr(/*detect=*/true);
            if (!cidr)
                notice_once(
                    "SSH (port 22) of this pool's instances is open to 0.0.0.0/0, since this "
                    "client's public address is unknown; set SKY_CLIENT_CIDR (e.g. "
                    "203.0.113.7/32) to allow only it");
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
            // The pool's own members on every port: rendezvous and collective traffic between
            // nodes stays on the VPC's private addresses and is open to nothing else.
            a.set("IpPermissions.2.IpProtocol", "-1");
            a.set("IpPermissions.2.Groups.1.GroupId", group_id_);
            try {
                (void)client_->call("AuthorizeSecurityGroupIngress", a);
            } catch (const HttpError& e) {
                if (e.code() != "InvalidPermission.Duplicate")
                    fail("AuthorizeSecurityGroupIngress", e);
            }
        }
    }

    // The security groups with this name: (id, name) pairs. Throws what the call throws.
    std::vector<std::pair<std::string, std::string>> groups_named(const std::string& name) const {
        QueryParams d;
        d.set("Filter.1.Name", "group-name");
        d.set("Filter.1.Value.1", name);
        json r = client_->call_json("DescribeSecurityGroups", d);
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& g : list_of(r, "securityGroupInfo"))
            out.emplace_back(str_of(g, "groupId"), str_of(g, "groupName"));
        return out;
    }

    // A ProvisionError naming the action; CredentialsRefused when EC2 refused the credentials.
    [[noreturn]] void fail(const std::string& action, const std::exception& e) const {
        throw_provision_error(fmt::format("AWS {} failed: {}", action, error_text(e)),
                              refusal_status(e));
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
            fail("DescribeImages", e);
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

    // How a spot node learns it is being reclaimed: the instance metadata (IMDSv2) answers
    // spot/instance-action about two minutes before, and the rebalance recommendation
    // sometimes earlier; spot_probe.sh asks both and prints the notice with EC2's deadline.
    // Only on machines our own user-data marked (never a test host or anyone else's machine);
    // SKY_AWS_PREEMPTION_PROBE replaces the command (the project's tests point the script at a
    // metadata endpoint on the test host).
    static std::string preemption_probe() {
        if (const char* p = std::getenv("SKY_AWS_PREEMPTION_PROBE"); p && *p) return p;
        return std::string(scripts::spot_probe_sh());
    }

    std::unique_ptr<aws::Ec2Client> client_;
    std::string ssh_user_;
    std::chrono::seconds boot_wait_{300};
    std::chrono::seconds infra_wait_{120};
    std::mutex infra_m_;  // guards the key pair, group and images
    bool key_imported_ = false;
    std::string group_id_;
    std::string gpu_ami_, cpu_ami_;
    std::map<std::string, std::string> why_left_;  // "group:<id>" / "key:<name>" -> EC2's answer
    // "key:<name>" / "group:<name>": deleted by this adapter, EC2 said so (guarded by infra_m_).
    std::set<std::string> deleted_;
};

}  // namespace

ProviderDescriptor aws_provider() {
    ProviderDescriptor d({
        .exposure =
            [](const PoolSpec&) {
                return Exposure::pool_machines_only(
                    "the pool's own security group admits only the pool's machines");
            },
        // Per second with a 60 s minimum (Linux on-demand and spot).
        .billing = BillingPolicy{.increment = std::chrono::seconds(1),
                                 .minimum = std::chrono::seconds(60)},
        .runs_on_this_machine = false,
    });
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return make_cloud_backend(std::make_unique<Ec2Adapter>(*c.spec.provider.get<AWS>()), c);
    };
    d.credentials = [] {
        CredentialStatus c;
        if (!env_or("AWS_ACCESS_KEY_ID").empty() && !env_or("AWS_SECRET_ACCESS_KEY").empty()) {
            c.present = true;
            c.source = "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)";
        } else if (auto cred = aws::load_default_credentials()) {
            c.present = true;
            c.source =
                fmt::format("~/.aws/credentials (profile {})", env_or("AWS_PROFILE", "default"));
            c.secrets.push_back(cred->secret_access_key);
            if (!cred->session_token.empty()) c.secrets.push_back(cred->session_token);
        } else {
            c.source = "missing: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials";
        }
        for (const char* k : {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"})
            if (auto v = env_or(k); !v.empty()) c.secrets.push_back(v);
        const std::string region = env_or("AWS_REGION", env_or("AWS_DEFAULT_REGION", "us-east-1"));
        c.endpoint = env_or(
            "AWS_ENDPOINT_URL_EC2",
            env_or("AWS_ENDPOINT_URL", fmt::format("https://ec2.{}.amazonaws.com/", region)));
        return c;
    };
    auto adapter = [](std::string_view region) {
        AWS cfg;
        cfg.region = region.empty()
                         ? env_or("AWS_REGION", env_or("AWS_DEFAULT_REGION", "us-east-1"))
                         : std::string(region);
        return std::make_unique<Ec2Adapter>(cfg);
    };
    d.make_adapter = [adapter](std::string_view region) -> std::unique_ptr<CloudAdapter> {
        return adapter(region);
    };
    // EC2 shows terminated instances for about an hour: `sky ls --all` lists those too.
    d.list_machines = [adapter](const MachineQuery& q) {
        auto a = adapter(q.region);
        return Machines{a->region(), a->tagged("", q.include_gone)};
    };
    add_cloud_gc(d);
    return d;
}

}  // namespace sky::detail
