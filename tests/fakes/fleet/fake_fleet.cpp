#include "fakes/fleet/fake_fleet.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fakes/common/host_binding.hpp"
#include "hosts/test_hosts.hpp"

namespace sky::test {

namespace {

using json = nlohmann::json;

HttpReply error(int status, const std::string& message) {
    return {status, json{{"error", message}}.dump()};
}

}  // namespace

FakeFleet::FakeFleet(FakeFleetOptions options) : options_(std::move(options)) {
    if (options_.token.empty()) throw std::invalid_argument("fake fleet: a token is required");
    if (options_.hosts) binding_ = std::make_unique<HostBinding>(*options_.hosts);
    for (auto& spec : options_.machines) {
        if (options_.hosts && (spec.host < 0 || spec.host >= options_.hosts->size()))
            throw std::invalid_argument("fake fleet: machine " + spec.id + " has no test host");
        Machine m;
        m.spec = spec;
        m.now.id = spec.id;
        m.now.type = spec.type;
        m.now.state = "free";
        machines_.push_back(std::move(m));
    }
    http_ = std::make_unique<HttpFake>(HttpFakeOptions{.server = "fake-fleet"});
    // Every route checks the bearer token first.
    auto authorized = [this](HttpFake::Handler h) {
        return [this, h = std::move(h)](const HttpRequest& r) {
            if (r.header("Authorization") != "Bearer " + options_.token)
                return error(401, "a valid bearer token is required");
            return h(r);
        };
    };
    http_->route("GET", "/v1/machines",
                 authorized([this](const HttpRequest&) { return list_machines(); }));
    http_->route("GET", "/v1/machines/{id}",
                 authorized([this](const HttpRequest& r) { return get_machine(r); }));
    http_->route("POST", "/v1/machines/{id}/claim",
                 authorized([this](const HttpRequest& r) { return claim(r); }));
    http_->route("POST", "/v1/machines/{id}/release",
                 authorized([this](const HttpRequest& r) { return release(r); }));
}

FakeFleet::~FakeFleet() { http_.reset(); }

FakeFleet::Machine* FakeFleet::find(const std::string& id) {
    for (auto& m : machines_)
        if (m.spec.id == id) return &m;
    return nullptr;
}

std::string FakeFleet::state_of(const Machine& m) const {
    if (m.now.state != "booting") return m.now.state;
    const bool up =
        m.booted && std::chrono::steady_clock::now() - m.claimed_at >= options_.boot_time;
    return up ? "ready" : "booting";
}

std::string FakeFleet::to_json(const Machine& m) const {
    std::string address = m.spec.address;
    int port = m.spec.ssh_port;
    if (options_.hosts) {
        address = options_.hosts->address(m.spec.host);
        port = options_.hosts->port(m.spec.host);
    }
    return json{{"id", m.spec.id},
                {"address", address},
                {"ssh_port", port},
                {"type", m.spec.type},
                {"vcpus", m.spec.vcpus},
                {"memory_gb", m.spec.memory_gb},
                {"gpu", m.spec.gpu},
                {"gpu_count", m.spec.gpu_count},
                {"hourly_price", m.spec.hourly_price},
                {"state", state_of(m)},
                {"pool", m.now.pool},
                {"claim", m.now.claim}}
        .dump();
}

HttpReply FakeFleet::list_machines() {
    std::lock_guard lock(mutex_);
    std::string body = R"({"machines":[)";
    for (std::size_t i = 0; i < machines_.size(); ++i)
        body += (i ? "," : "") + to_json(machines_[i]);
    return {200, body + "]}"};
}

HttpReply FakeFleet::get_machine(const HttpRequest& r) {
    std::lock_guard lock(mutex_);
    const Machine* m = find(r.params.at("id"));
    if (!m) return error(404, "no machine " + r.params.at("id"));
    return {200, to_json(*m)};
}

HttpReply FakeFleet::claim(const HttpRequest& r) {
    const std::string id = r.params.at("id");
    json body;
    try {
        body = json::parse(r.body);
    } catch (const json::exception&) {
        return error(400, "the body must be JSON");
    }
    for (const char* field : {"pool", "boot_script", "public_key"})
        if (!body.is_object() || !body.contains(field) || !body[field].is_string() ||
            body[field].get<std::string>().empty())
            return error(400, std::string("missing string field ") + field);
    const std::string pool = body["pool"], script = body["boot_script"], key = body["public_key"];
    if (script.rfind("#!", 0) != 0) return error(400, "boot_script must start with #!");
    if (key.rfind("ssh-", 0) != 0) return error(400, "public_key must be an OpenSSH public key");
    std::string claim_id;
    int host = -1;
    {
        std::lock_guard lock(mutex_);
        Machine* m = find(id);
        if (!m) return error(404, "no machine " + id);
        if (m->now.state == "down") return error(409, "machine " + id + " is down");
        if (m->now.state != "free")
            return error(409, "machine " + id + " is claimed by " + m->now.pool);
        claim_id = "c" + std::to_string(next_claim_++);
        m->now.state = "booting";
        m->now.pool = pool;
        m->now.claim = claim_id;
        m->now.boot_script = script;
        m->now.public_key = key;
        ++m->now.claims;
        m->claimed_at = std::chrono::steady_clock::now();
        m->booted = false;
        host = m->spec.host;
    }
    // The inventory's contract: it runs the boot script as root and authorizes the key. Outside
    // the lock: listings go on while a machine boots.
    std::string failure;
    if (binding_) {
        try {
            binding_->boot(id, host, script, key);
        } catch (const std::exception& e) {
            failure = e.what();
        }
    }
    std::lock_guard lock(mutex_);
    Machine* m = find(id);
    if (m->now.claim != claim_id) return error(409, "the claim was released while booting");
    if (!failure.empty()) {
        m->now.state = "down";
        return error(500, "machine " + id + " failed to boot: " + failure);
    }
    m->booted = true;
    return {200, to_json(*m)};
}

HttpReply FakeFleet::release(const HttpRequest& r) {
    const std::string id = r.params.at("id");
    std::string claim_id;
    try {
        json body = json::parse(r.body);
        claim_id = body.value("claim", "");
    } catch (const json::exception&) {
        return error(400, "the body must be JSON");
    }
    {
        std::lock_guard lock(mutex_);
        Machine* m = find(id);
        if (!m) return error(404, "no machine " + id);
        if (claim_id.empty() || m->now.claim != claim_id)
            return error(409, "machine " + id + " is not held by claim " + claim_id);
        m->now.state = "free";
        m->now.pool.clear();
        m->now.claim.clear();
        m->booted = false;
        ++m->now.releases;
    }
    if (binding_) binding_->release(id);  // everything on the machine stops
    return {200, json{{"released", id}}.dump()};
}

std::vector<FleetMachineState> FakeFleet::machines() const {
    std::lock_guard lock(mutex_);
    std::vector<FleetMachineState> out;
    for (const auto& m : machines_) {
        FleetMachineState s = m.now;
        s.state = state_of(m);
        out.push_back(std::move(s));
    }
    return out;
}

int FakeFleet::claimed() const {
    int n = 0;
    for (const auto& m : machines()) n += m.state != "free" && m.state != "down" ? 1 : 0;
    return n;
}

void FakeFleet::claim_for_someone_else(const std::string& id, const std::string& pool) {
    std::lock_guard lock(mutex_);
    Machine* m = find(id);
    if (!m) throw std::invalid_argument("fake fleet: no machine " + id);
    m->now.state = "booting";
    m->booted = true;
    m->claimed_at = std::chrono::steady_clock::now() - options_.boot_time;
    m->now.pool = pool;
    m->now.claim = "c" + std::to_string(next_claim_++);
    ++m->now.claims;
}

void FakeFleet::set_down(const std::string& id, bool down) {
    std::lock_guard lock(mutex_);
    Machine* m = find(id);
    if (!m) throw std::invalid_argument("fake fleet: no machine " + id);
    m->now.state = down ? "down" : "free";
    if (!down) {
        m->now.pool.clear();
        m->now.claim.clear();
    }
}

}  // namespace sky::test
