// The fake DigitalOcean's cloud firewalls (digitalocean/openapi: resources/firewalls): POST,
// GET (list and one), DELETE /v2/firewalls, checked as the API checks them (a name of letters,
// digits, '.' and '-' starting with a letter or digit; at least one rule; protocol tcp, udp or
// icmp; ports "0" (all), a port or a range for tcp and udp, where the API answers "all" with a
// 422; none or "0" for icmp; sources and destinations of addresses, droplet ids, tags, load
// balancers or Kubernetes clusters, where a tag must exist and a droplet id must name a droplet).
// With test hosts they are enforced: each droplet's host gets an nft table in its network
// namespace that drops every inbound packet its firewalls do not allow (loopback and replies
// excepted), as DigitalOcean enforces them outside the droplet, whatever runs inside it.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <regex>

#include "fakes/common/host_binding.hpp"
#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "hosts/test_hosts.hpp"

namespace sky::test {

namespace {

using nlohmann::json;

HttpReply fw_error(int status, const std::string& id, const std::string& message) {
    return {status, json{{"id", id},
                         {"message", message},
                         {"request_id", "0d1c5a8e-3b1e-4c6b-9b1a-2f0e6f8b9c11"}}
                        .dump()};
}

HttpReply fw_unprocessable(const std::string& message) {
    return fw_error(422, "unprocessable_entity", message);
}

bool valid_name(const std::string& n) {
    static const std::regex re("^[a-zA-Z0-9][a-zA-Z0-9.-]{0,254}$");
    return std::regex_match(n, re);
}

bool valid_tag(const std::string& t) {
    static const std::regex re("^[a-zA-Z0-9_\\-:]{1,255}$");
    return std::regex_match(t, re);
}

bool valid_address(const std::string& a) {
    const std::string addr = a.substr(0, a.find('/'));
    unsigned char buf[16];
    const bool v6 = addr.find(':') != std::string::npos;
    if (::inet_pton(v6 ? AF_INET6 : AF_INET, addr.c_str(), buf) != 1) return false;
    if (a.find('/') == std::string::npos) return true;
    const std::string bits = a.substr(a.find('/') + 1);
    if (bits.empty() || bits.size() > 3 || !std::all_of(bits.begin(), bits.end(), ::isdigit))
        return false;
    return std::stoi(bits) <= (v6 ? 128 : 32);
}

// What a rule and a firewall may name: a tag of the account, a droplet that exists.
struct Known {
    std::function<bool(const std::string&)> tag;
    std::function<bool(long long)> droplet;
};

std::string unknown_tag(const std::string& t) {
    return fmt::format("tag {} does not exist: tag names must exist in order to be referenced", t);
}

std::string unknown_droplet(long long id) { return fmt::format("droplet {} does not exist", id); }

// "" when the rule is fine, else why not. `where` is "sources" or "destinations".
std::string rule_problem(const json& rule, const char* where, const Known& known) {
    if (!rule.is_object()) return "a rule must be an object";
    for (auto& [k, v] : rule.items())
        if (k != "protocol" && k != "ports" && k != where)
            return fmt::format("unknown attribute {} in a rule", k);
    if (!rule.contains("protocol") || !rule["protocol"].is_string()) return "protocol is required";
    const std::string protocol = rule["protocol"];
    if (protocol != "tcp" && protocol != "udp" && protocol != "icmp")
        return "protocol must be one of tcp, udp, icmp";
    if (protocol == "icmp") {
        if (rule.contains("ports") && rule["ports"] != "0" && rule["ports"] != "")
            return "ports must not be set for icmp rules";
    } else {
        if (!rule.contains("ports") || !rule["ports"].is_string()) return "ports is required";
        // A single port, a range ("8000-9000"), or "0" for all (firewall_rule.yml); the API
        // refuses the word "all" with this message.
        static const std::regex ports("^(0|[0-9]{1,5}(-[0-9]{1,5})?)$");
        const std::string p = rule["ports"];
        if (!std::regex_match(p, ports)) return "you must specify a valid range for ports";
        if (p != "0") {
            const int lo = std::stoi(p), hi = p.find('-') == std::string::npos
                                                  ? lo
                                                  : std::stoi(p.substr(p.find('-') + 1));
            if (lo < 1 || hi > 65535 || lo > hi) return "ports must be within 1-65535";
        }
    }
    if (!rule.contains(where) || !rule[where].is_object())
        return fmt::format("{} is required", where);
    bool any = false;
    for (auto& [k, v] : rule[where].items()) {
        if (k != "addresses" && k != "droplet_ids" && k != "tags" && k != "load_balancer_uids" &&
            k != "kubernetes_ids")
            return fmt::format("unknown attribute {} in {}", k, where);
        if (!v.is_array()) return fmt::format("{}.{} must be an array", where, k);
        for (const auto& x : v) {
            any = true;
            if (k == "addresses" && (!x.is_string() || !valid_address(x)))
                return fmt::format("{} is not a valid address or CIDR", x.dump());
            if (k == "tags" && (!x.is_string() || !valid_tag(x)))
                return fmt::format("{} is not a valid tag", x.dump());
            if (k == "tags" && !known.tag(x.get<std::string>()))
                return unknown_tag(x.get<std::string>());
            if (k == "droplet_ids" && !x.is_number_integer()) return "droplet_ids must be integers";
            if (k == "droplet_ids" && !known.droplet(x.get<long long>()))
                return unknown_droplet(x.get<long long>());
        }
    }
    if (!any) return fmt::format("{} must name at least one source", where);
    return {};
}

}  // namespace

HttpReply FakeDigitalOcean::handle_firewall_create(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object()) return fw_error(400, "bad_request", "unparsable JSON body");
    for (auto& [k, v] : b.items())
        if (k != "name" && k != "inbound_rules" && k != "outbound_rules" && k != "droplet_ids" &&
            k != "tags")
            return fw_unprocessable(fmt::format("unknown attribute: {}", k));
    if (!b.contains("name") || !b["name"].is_string() || !valid_name(b["name"]))
        return fw_unprocessable(
            "name must begin with a letter or digit and hold only letters, digits, '.' and '-'");
    std::lock_guard lk(m_);
    const Known known{[&](const std::string& t) { return tags_.count(t) > 0; },
                      [&](long long id) { return live(std::to_string(id)) != nullptr; }};
    std::size_t rules = 0;
    for (const char* k : {"inbound_rules", "outbound_rules"}) {
        if (!b.contains(k)) continue;
        if (!b[k].is_array()) return fw_unprocessable(std::string(k) + " must be an array");
        for (const auto& rule : b[k]) {
            auto p = rule_problem(
                rule, std::string(k) == "inbound_rules" ? "sources" : "destinations", known);
            if (!p.empty()) return fw_unprocessable(p);
            ++rules;
        }
    }
    if (rules == 0)
        return fw_unprocessable("a firewall needs at least one inbound or outbound rule");
    if (b.contains("tags")) {
        if (!b["tags"].is_array()) return fw_unprocessable("tags must be an array of strings");
        for (const auto& t : b["tags"])
            if (!t.is_string() || !valid_tag(t)) return fw_unprocessable("a tag is invalid");
        for (const auto& t : b["tags"])
            if (!known.tag(t.get<std::string>()))
                return fw_unprocessable(unknown_tag(t.get<std::string>()));
    }
    if (b.contains("droplet_ids")) {
        if (!b["droplet_ids"].is_array()) return fw_unprocessable("droplet_ids must be an array");
        for (const auto& d : b["droplet_ids"])
            if (!d.is_number_integer()) return fw_unprocessable("droplet_ids must be integers");
        for (const auto& d : b["droplet_ids"])
            if (!known.droplet(d.get<long long>()))
                return fw_unprocessable(unknown_droplet(d.get<long long>()));
    }
    json fw = {{"id", fmt::format("bb4b2611-3d72-467b-8602-{:012x}", firewalls_.size() + 1)},
               {"status", "succeeded"},
               {"created_at", "2026-11-23T10:00:00Z"},
               {"pending_changes", json::array()},
               {"name", b["name"]},
               {"inbound_rules", b.value("inbound_rules", json::array())},
               {"outbound_rules", b.value("outbound_rules", json::array())},
               {"droplet_ids", b.value("droplet_ids", json::array())},
               {"tags", b.value("tags", json::array())}};
    firewalls_.push_back(fw);
    enforce_locked();
    return {202, json{{"firewall", fw}}.dump()};
}

HttpReply FakeDigitalOcean::handle_firewall_list(const HttpRequest& r) {
    std::lock_guard lk(m_);
    auto q = r.query_params();
    int per_page = 20, page = 1;
    try {
        if (q.count("per_page")) per_page = std::stoi(q["per_page"]);
        if (q.count("page")) page = std::stoi(q["page"]);
    } catch (const std::exception&) {
        return fw_unprocessable("per_page and page must be integers");
    }
    if (per_page < 1 || per_page > 200 || page < 1)
        return fw_unprocessable("per_page must be between 1 and 200");
    json list = json::array();
    const std::size_t first = static_cast<std::size_t>((page - 1) * per_page);
    for (std::size_t i = first; i < firewalls_.size() && i < first + per_page; ++i)
        list.push_back(firewalls_[i]);
    json links = json::object();
    if (first + per_page < firewalls_.size())
        links["pages"] = {{"next", fmt::format("https://api.digitalocean.com/v2/firewalls?page={}"
                                               "&per_page={}",
                                               page + 1, per_page)}};
    return {200,
            json{{"firewalls", list}, {"links", links}, {"meta", {{"total", firewalls_.size()}}}}
                .dump()};
}

HttpReply FakeDigitalOcean::handle_firewall_get(const HttpRequest& r) {
    std::lock_guard lk(m_);
    for (const auto& f : firewalls_)
        if (f["id"] == r.params.at("id")) return {200, json{{"firewall", f}}.dump()};
    return fw_error(404, "not_found", "The resource you were accessing could not be found.");
}

HttpReply FakeDigitalOcean::handle_firewall_delete(const HttpRequest& r) {
    std::lock_guard lk(m_);
    auto it = std::find_if(firewalls_.begin(), firewalls_.end(),
                           [&](const json& f) { return f["id"] == r.params.at("id"); });
    if (it == firewalls_.end())
        return fw_error(404, "not_found", "The resource you were accessing could not be found.");
    firewalls_.erase(it);
    enforce_locked();
    return {204, ""};
}

std::vector<json> FakeDigitalOcean::firewalls() const {
    std::lock_guard lk(m_);
    return firewalls_;
}

bool FakeDigitalOcean::enforcing() const {
    std::lock_guard lk(m_);
    return options_.hosts && options_.enforce_firewalls && nft_;
}

void FakeDigitalOcean::enforce_locked() {
    if (!options_.hosts || !options_.enforce_firewalls || !nft_) return;
    TestHosts& hosts = options_.hosts->hosts();
    // Each live droplet's addresses and tags, for rules that name droplets by tag or id.
    struct Live {
        long long id;
        int host;
        std::string address;
        json tags;
    };
    std::vector<Live> live;
    for (const auto& [id, d] : machines_) {
        if (d.gone) continue;
        auto host = options_.hosts->host_of(id);
        if (host) live.push_back({std::stoll(id), *host, d.ip, d.body["tags"]});
    }
    auto has_tag = [](const json& tags, const json& tag) {
        return std::find(tags.begin(), tags.end(), tag) != tags.end();
    };
    std::set<int> now_filtered;
    for (const auto& drop : live) {
        std::vector<const json*> applying;
        for (const auto& f : firewalls_) {
            bool applies = std::find(f["droplet_ids"].begin(), f["droplet_ids"].end(), drop.id) !=
                           f["droplet_ids"].end();
            for (const auto& t : f["tags"]) applies = applies || has_tag(drop.tags, t);
            if (applies) applying.push_back(&f);
        }
        if (applying.empty()) continue;
        std::string rules;
        for (const json* f : applying)
            for (const auto& rule : (*f)["inbound_rules"]) {
                std::vector<std::string> v4, v6;
                const json& src = rule["sources"];
                for (const auto& a : src.value("addresses", json::array())) {
                    const std::string s = a;
                    (s.find(':') != std::string::npos ? v6 : v4).push_back(s);
                }
                for (const auto& other : live) {
                    bool named = false;
                    for (const auto& t : src.value("tags", json::array()))
                        named = named || has_tag(other.tags, t);
                    for (const auto& i : src.value("droplet_ids", json::array()))
                        named = named || i == other.id;
                    if (named) v4.push_back(other.address);
                }
                const std::string protocol = rule["protocol"];
                std::string match = protocol == "icmp" ? "meta l4proto { icmp, ipv6-icmp }"
                                                       : "meta l4proto " + protocol;
                const std::string ports = rule.value("ports", std::string("0"));
                if (protocol != "icmp" && ports != "0")
                    match += fmt::format(" {} dport {}", protocol, ports);
                if (!v4.empty())
                    rules += fmt::format("    ip saddr {{ {} }} {} accept\n", fmt::join(v4, ", "),
                                         match);
                if (!v6.empty())
                    rules += fmt::format("    ip6 saddr {{ {} }} {} accept\n", fmt::join(v6, ", "),
                                         match);
            }
        const std::string file =
            (hosts.dir() / fmt::format("do-firewall-{}.nft", drop.host)).string();
        std::ofstream(file) << "table inet do_cloud_firewall\n"
                               "delete table inet do_cloud_firewall\n"
                               "table inet do_cloud_firewall {\n"
                               "  chain input {\n"
                               "    type filter hook input priority 0; policy drop;\n"
                               "    iif \"lo\" accept\n"
                               "    ct state established,related accept\n"
                            << rules << "  }\n}\n";
        auto r = run_command({"ip", "netns", "exec", hosts.netns(drop.host), "nft", "-f", file});
        if (r.status != 0)
            throw std::runtime_error("fake DigitalOcean: applying a firewall failed: " + r.output);
        now_filtered.insert(drop.host);
    }
    // Hosts with no droplet behind a firewall any more are open again.
    for (int h : filtered_hosts_)
        if (!now_filtered.count(h))
            (void)run_command({"ip", "netns", "exec", hosts.netns(h), "nft", "delete", "table",
                               "inet", "do_cloud_firewall"});
    filtered_hosts_ = std::move(now_filtered);
}

}  // namespace sky::test
