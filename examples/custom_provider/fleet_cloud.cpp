// FleetCloud over the inventory's REST API (README.md): libcurl for HTTP, nlohmann-json for the
// bodies. Every method may run on several threads at once: each request has its own curl handle
// and the adapter keeps no state but its settings.
#include "fleet_cloud.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sky/sky.hpp>
#include <stdexcept>
#include <thread>

namespace fleet {

namespace {

using json = nlohmann::json;

// A claim is named "<machine id>@<claim id>": a machine is claimed over and over by different
// pools, so its id alone would let a late terminate() release the next pool's claim. The claim
// id is the inventory's, fresh for each claim.
constexpr char kClaimSeparator = '@';
// Claims sky makes carry this label prefix, so that list("") finds every sky claim and nobody
// else's.
constexpr std::string_view kPoolPrefix = "sky-";

struct Reply {
    long status = 0;
    std::string body;
};

struct Machine {
    std::string id, address, type, gpu, state, pool, claim;
    int ssh_port = 22, vcpus = 0, gpu_count = 0;
    double memory_gb = 0, hourly_price = 0;
};

std::size_t append_body(char* data, std::size_t size, std::size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

std::string escape_segment(const std::string& s) {
    std::unique_ptr<char, decltype(&curl_free)> e(
        curl_escape(s.c_str(), static_cast<int>(s.size())), curl_free);
    if (!e) throw std::runtime_error("fleet: out of memory");
    return e.get();
}

// The server's own words for an error: its JSON "error" field, else the start of the body.
std::string server_says(const Reply& r) {
    try {
        json j = json::parse(r.body);
        if (j.is_object() && j.contains("error") && j["error"].is_string())
            return j["error"].get<std::string>();
    } catch (const json::exception&) {
    }
    return r.body.substr(0, 200);
}

// One HTTP exchange. Errors never include the token: it lives only in the header list.
Reply send_once(const std::string& base, const std::string& token, const std::string& method,
                const std::string& path, const std::string& body) {
    static std::once_flag init;
    std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) throw std::runtime_error("fleet: cannot start libcurl");
    curl_slist* list = nullptr;
    const std::string auth = "Authorization: Bearer " + token;
    for (const char* h :
         {auth.c_str(), "Accept: application/json", "Content-Type: application/json"})
        list = curl_slist_append(list, h);
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, curl_slist_free_all);
    const std::string url = base + path;
    Reply reply;
    char error[CURL_ERROR_SIZE] = {};
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    if (method == "POST") {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // several threads: no SIGALRM timeouts
    // The token must not follow a redirect to another host: no redirects at all.
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    const CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        throw std::runtime_error("fleet: " + method + " " + path + ": " +
                                 (error[0] ? error : curl_easy_strerror(rc)));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
}

// A GET is retried (3 tries, 0.2 s then 0.4 s apart) on transport errors and on 429 and 5xx:
// the inventory is one small service that restarts now and then. A POST is sent once: a claim
// whose answer was lost is found by its pool label (list()), never claimed twice by this code.
Reply send(const std::string& base, const std::string& token, const std::string& method,
           const std::string& path, const std::string& body = {}) {
    const int tries = method == "GET" ? 3 : 1;
    for (int attempt = 1;; ++attempt) {
        try {
            Reply r = send_once(base, token, method, path, body);
            if (attempt < tries && (r.status == 429 || r.status >= 500)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
                continue;
            }
            return r;
        } catch (const std::runtime_error&) {
            if (attempt >= tries) throw;
            std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
        }
    }
}

[[noreturn]] void fail(const std::string& what, const Reply& r) {
    throw std::runtime_error("fleet: " + what + ": HTTP " + std::to_string(r.status) + ": " +
                             server_says(r));
}

Machine machine_of(const json& j) {
    Machine m;
    m.id = j.at("id").get<std::string>();
    m.address = j.value("address", "");
    m.ssh_port = j.value("ssh_port", 22);
    m.type = j.value("type", "");
    m.vcpus = j.value("vcpus", 0);
    m.memory_gb = j.value("memory_gb", 0.0);
    m.gpu = j.value("gpu", "");
    m.gpu_count = j.value("gpu_count", 0);
    m.hourly_price = j.value("hourly_price", 0.0);
    m.state = j.value("state", "");
    m.pool = j.value("pool", "");
    m.claim = j.value("claim", "");
    return m;
}

std::vector<Machine> machines(const std::string& base, const std::string& token) {
    Reply r = send(base, token, "GET", "/v1/machines");
    if (r.status != 200) fail("GET /v1/machines", r);
    try {
        const json answer = json::parse(r.body);
        std::vector<Machine> out;
        for (const auto& j : answer.at("machines")) out.push_back(machine_of(j));
        return out;
    } catch (const json::exception& e) {
        throw std::runtime_error(std::string("fleet: GET /v1/machines: unexpected answer: ") +
                                 e.what());
    }
}

std::string pool_label(std::string_view pool_id) {
    return std::string(kPoolPrefix) + std::string(pool_id);
}

sky::CloudInstance instance_of(const Machine& m, const std::string& id) {
    sky::CloudInstance i;
    i.id = id;
    i.public_ip = m.address;
    i.private_ip = m.address;  // one lab network: the nodes reach each other where we reach them
    i.ssh_port = m.ssh_port;
    i.instance_type = m.type;
    if (m.pool.rfind(kPoolPrefix, 0) == 0) i.pool_id = m.pool.substr(kPoolPrefix.size());
    if (m.state == "booting") {
        i.state = sky::CloudInstance::State::pending;
    } else if (m.state == "ready") {
        i.state = sky::CloudInstance::State::running;
    } else if (m.state == "releasing") {
        i.state = sky::CloudInstance::State::stopping;
    } else {
        i.state = sky::CloudInstance::State::gone;  // "free", "down", or a state we do not know
        i.reason = "the machine is " + m.state;
    }
    return i;
}

}  // namespace

FleetCloud::FleetCloud(std::string url, std::string token)
    : url_(std::move(url)), token_(std::move(token)) {
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
    // Checked here, so that a pool fails at once with a message that names the setting.
    if (url_.rfind("http://", 0) != 0 && url_.rfind("https://", 0) != 0)
        throw sky::ConfigError("fleet: the inventory URL must start with http:// or https://");
    if (token_.empty()) throw sky::ConfigError("fleet: the inventory token is empty");
}

std::vector<sky::Offer> FleetCloud::live_offers(const sky::Catalog&, const sky::SelectionRequest&,
                                                const std::function<void(sky::Event)>& notify) {
    std::map<std::string, sky::Offer> by_type;
    std::map<std::string, int> down;
    for (const Machine& m : machines(url_, token_)) {
        if (m.state == "down") ++down[m.type];
        auto [it, fresh] = by_type.try_emplace(m.type);
        sky::Offer& o = it->second;
        if (fresh) {
            o.provider = name();
            o.instance_type = m.type;
            o.accelerator = m.gpu;
            o.accelerator_count = m.gpu.empty() ? 0 : m.gpu_count;
            o.vcpus = m.vcpus;
            o.memory_gb = m.memory_gb;
            o.on_demand_price = m.hourly_price;
            o.spot_available = false;  // the lab's machines are never taken back
        }
        // Machines of one type are alike; their internal price may not be: quote the cheapest.
        o.on_demand_price = std::min(o.on_demand_price, m.hourly_price);
    }
    for (const auto& [type, n] : down)
        notify(sky::ErrorEvent{"fleet: " + std::to_string(n) + " " + type + " machine(s) down",
                               std::nullopt});
    std::vector<sky::Offer> out;
    for (auto& [type, o] : by_type) out.push_back(std::move(o));
    return out;
}

std::string FleetCloud::launch(const sky::LaunchRequest& request) {
    const std::string& type = request.offer.instance_type;
    int of_type = 0;
    for (const Machine& m : machines(url_, token_)) {
        if (m.type != type) continue;
        ++of_type;
        if (m.state != "free") continue;
        const json claim = {{"pool", pool_label(request.pool_id)},
                            {"boot_script", request.boot_script},
                            {"public_key", request.ssh_public_key}};
        const std::string path = "/v1/machines/" + escape_segment(m.id) + "/claim";
        // A claim whose answer is lost may have happened: LaunchAnswerLostError has the pool
        // look for it by its label (list()) instead of failing.
        Reply r;
        try {
            r = send(url_, token_, "POST", path, claim.dump());
        } catch (const std::runtime_error& e) {  // no answer (a timeout, a cut connection)
            throw sky::LaunchAnswerLostError(e.what());
        }
        if (r.status == 409) continue;  // claimed by someone else since the listing: next one
        if (r.status >= 500)
            throw sky::LaunchAnswerLostError("fleet: POST " + path + ": HTTP " +
                                             std::to_string(r.status) + ": " + server_says(r));
        if (r.status != 200) fail("POST " + path, r);
        std::string claim_id;
        try {
            claim_id = json::parse(r.body).at("claim").get<std::string>();
        } catch (const json::exception& e) {
            throw sky::LaunchAnswerLostError("fleet: POST " + path +
                                             ": unexpected answer: " + e.what());
        }
        return m.id + kClaimSeparator + claim_id;
    }
    // The pool moves on to the next machine type.
    throw sky::CapacityError("fleet: every " + type + " machine is claimed (" +
                             std::to_string(of_type) + " in the inventory)");
}

std::vector<sky::CloudInstance> FleetCloud::describe(const std::vector<std::string>& ids) {
    std::map<std::string, Machine> by_id;
    for (Machine& m : machines(url_, token_)) by_id.emplace(m.id, std::move(m));
    std::vector<sky::CloudInstance> out;
    for (const std::string& id : ids) {
        const auto at = id.rfind(kClaimSeparator);
        const std::string machine = id.substr(0, at);
        const std::string claim = at == std::string::npos ? "" : id.substr(at + 1);
        auto it = by_id.find(machine);
        if (it == by_id.end() || claim.empty()) {
            sky::CloudInstance i;
            i.id = id;
            i.state = sky::CloudInstance::State::unknown;
            out.push_back(std::move(i));
            continue;
        }
        sky::CloudInstance i = instance_of(it->second, id);
        if (it->second.claim != claim) {  // released: free now, or another pool's claim
            i.state = sky::CloudInstance::State::gone;
            i.reason = "the claim was released";
        }
        out.push_back(std::move(i));
    }
    return out;
}

void FleetCloud::terminate(const std::vector<std::string>& ids) {
    std::string first_error;
    for (const std::string& id : ids) {
        const auto at = id.rfind(kClaimSeparator);
        if (at == std::string::npos) continue;  // not a claim of ours: nothing to release
        const std::string path = "/v1/machines/" + escape_segment(id.substr(0, at)) + "/release";
        try {
            Reply r = send(url_, token_, "POST", path, json{{"claim", id.substr(at + 1)}}.dump());
            // 404: no such machine; 409: that claim is already over. Both: gone, as asked.
            if (r.status != 200 && r.status != 404 && r.status != 409) fail("POST " + path, r);
        } catch (const std::exception& e) {
            if (first_error.empty()) first_error = e.what();  // release the others first
        }
    }
    if (!first_error.empty()) throw std::runtime_error(first_error);
}

std::vector<sky::CloudInstance> FleetCloud::list(std::string_view pool_id) {
    std::vector<sky::CloudInstance> out;
    for (const Machine& m : machines(url_, token_)) {
        if (m.state == "free" || m.claim.empty()) continue;
        const bool ours =
            pool_id.empty() ? m.pool.rfind(kPoolPrefix, 0) == 0 : m.pool == pool_label(pool_id);
        if (ours) out.push_back(instance_of(m, m.id + kClaimSeparator + m.claim));
    }
    return out;
}

sky::CloudLogin FleetCloud::login() const {
    sky::CloudLogin l;
    l.user = "root";
    l.power_off_on_expiry = false;  // a released machine goes back to the lab, running
    l.boot_wait = std::chrono::seconds(120);
    return l;
}

}  // namespace fleet
