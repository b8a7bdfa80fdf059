// The base of the REST cloud fakes (see rest_fake.hpp).
#include "fakes/common/rest_fake.hpp"

#include <utility>

#include "fakes/common/host_binding.hpp"
#include "hosts/test_hosts.hpp"

namespace sky::test {

RestFake::RestFake(std::string server, std::string prefix, HostBinding* hosts)
    : http_(HttpFakeOptions{.server = std::move(server)}),
      hosts_(hosts),
      prefix_(std::move(prefix)) {}

RestFake::~RestFake() {
    std::lock_guard lk(m_);
    remove_all();
}

int RestFake::alive() const {
    std::lock_guard lk(m_);
    int n = 0;
    for (const auto& [id, m] : machines_) n += m.gone ? 0 : 1;
    return n;
}

bool RestFake::has_key(const HttpRequest& r, const std::string& key, bool or_query_param) {
    if (r.header("Authorization") == "Bearer " + key) return true;
    return or_query_param && r.query_params()["api_key"] == key;
}

bool RestFake::json_declared(const HttpRequest& r) {
    return r.header("Content-Type").rfind("application/json", 0) == 0;
}

HttpReply RestFake::json_reply(int status, const nlohmann::json& body) {
    return {status, body.dump()};
}

FakeMachine* RestFake::add_machine(const std::string& id, std::string_view boot_script,
                                   const std::vector<std::string>& keys, std::string ip, int port) {
    FakeMachine m;
    m.user_data = std::string(boot_script);
    if (hosts_) {
        std::string authorized;
        for (const auto& k : keys) authorized += (authorized.empty() ? "" : "\n") + k;
        auto host = hosts_->boot_any(id, boot_script, authorized);
        if (!host) return nullptr;
        ip = hosts_->hosts().address(*host);
        port = hosts_->hosts().port(*host);  // the test host's sshd: no port mapping
    }
    m.ip = std::move(ip);
    m.port = port;
    return &(machines_[id] = std::move(m));
}

FakeMachine* RestFake::live(const std::string& id) {
    auto it = machines_.find(id);
    return it == machines_.end() || it->second.gone ? nullptr : &it->second;
}

void RestFake::remove_machine(const std::string& id) {
    auto it = machines_.find(id);
    if (it == machines_.end() || it->second.gone) return;
    it->second.gone = true;
    // A machine the cloud took back has no host any more; releasing an unbound one is nothing.
    if (hosts_) hosts_->release(id);
}

void RestFake::reclaim(const std::string& id) {
    std::lock_guard lk(m_);
    machines_.at(id).reclaimed = true;
    if (hosts_) hosts_->release(id);
}

std::vector<nlohmann::json> RestFake::live_views() const {
    std::lock_guard lk(m_);
    std::vector<nlohmann::json> out;
    for (const auto& [id, m] : machines_)
        if (!m.gone) out.push_back(view(id));
    return out;
}

void RestFake::remove_all() {
    for (auto& [id, m] : machines_) remove_machine(id);
}

}  // namespace sky::test
