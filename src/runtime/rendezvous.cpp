#include "runtime/rendezvous.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "sky/errors.hpp"

namespace sky::detail {

PluginSpec make_plugin(PluginSpec::Kind kind, std::string_view backend) {
    PluginSpec p;
    p.kind = kind;
    switch (kind) {
        case PluginSpec::torch:
        case PluginSpec::transformers:
            if (backend != "nccl" && backend != "gloo" && backend != "mpi" && backend != "ucc")
                throw ConfigError(fmt::format(
                    "sky::distributed::{}: backend '{}' is not one of nccl, gloo, mpi, ucc",
                    kind == PluginSpec::torch ? "torch" : "transformers", backend));
            p.backend = backend;
            break;
        case PluginSpec::keras:
            if (backend != "jax" && backend != "torch" && backend != "tensorflow")
                throw ConfigError(fmt::format(
                    "sky::distributed::keras: backend '{}' is not one of jax, torch, tensorflow",
                    backend));
            p.backend = backend;
            break;
        case PluginSpec::jax:
        case PluginSpec::tensorflow:
            break;
        default:
            throw ConfigError(fmt::format("unknown distributed plugin kind {}", int{kind}));
    }
    return p;
}

namespace {

void add_torch(EnvVars& v, const PoolLayout& l, const RankPlace& p, int rank, int world,
               const std::string& backend) {
    const int w = l.workers[static_cast<std::size_t>(p.node)];
    v.emplace_back("MASTER_ADDR", l.peers.front());
    v.emplace_back("MASTER_PORT", std::to_string(l.ports.front().front()));
    v.emplace_back("WORLD_SIZE", std::to_string(world));
    v.emplace_back("RANK", std::to_string(rank));
    v.emplace_back("LOCAL_RANK", std::to_string(p.worker));
    v.emplace_back("LOCAL_WORLD_SIZE", std::to_string(w));
    v.emplace_back("NODE_RANK", std::to_string(p.node));
    if (!p.interface.empty()) {
        v.emplace_back("GLOO_SOCKET_IFNAME", p.interface);
        v.emplace_back("NCCL_SOCKET_IFNAME", p.interface);
    }
    // Not in torchrun's set: the plugin's backend, for programs that create their process group
    // from the environment alone.
    if (!backend.empty()) v.emplace_back("SKY_DISTRIBUTED_BACKEND", backend);
}

void add_jax(EnvVars& v, const PoolLayout& l, int rank, int world) {
    v.emplace_back("JAX_COORDINATOR_ADDRESS",
                   fmt::format("{}:{}", l.peers.front(), l.ports.front().front()));
    v.emplace_back("JAX_NUM_PROCESSES", std::to_string(world));
    v.emplace_back("JAX_PROCESS_ID", std::to_string(rank));
}

void add_tensorflow(EnvVars& v, const PoolLayout& l, int rank) {
    nlohmann::json workers = nlohmann::json::array();
    for (std::size_t n = 0; n < l.peers.size(); ++n)
        for (int w = 0; w < l.workers[n]; ++w)
            workers.push_back(
                fmt::format("{}:{}", l.peers[n], l.ports[n][static_cast<std::size_t>(w)]));
    nlohmann::json tf = {{"cluster", {{"worker", workers}}},
                         {"task", {{"type", "worker"}, {"index", rank}}}};
    v.emplace_back("TF_CONFIG", tf.dump());
}

}  // namespace

EnvVars rendezvous_env(const PluginSpec& plugin, const PoolLayout& l, const RankPlace& where) {
    const std::size_t nodes = l.peers.size();
    bool ok = nodes > 0 && l.workers.size() == nodes && l.ports.size() == nodes &&
              (l.nodes.empty() || l.nodes.size() == nodes);
    for (std::size_t n = 0; ok && n < nodes; ++n)
        ok = l.workers[n] >= 1 && l.ports[n].size() == static_cast<std::size_t>(l.workers[n]);
    // The node's position in the world: its NODE_RANK, and where its ranks start.
    int position = -1;
    if (ok && l.nodes.empty() && where.node >= 0 && static_cast<std::size_t>(where.node) < nodes)
        position = where.node;
    for (std::size_t n = 0; ok && n < l.nodes.size(); ++n)
        if (l.nodes[n] == where.node) position = static_cast<int>(n);
    if (!ok || position < 0 || where.worker < 0 ||
        where.worker >= l.workers[static_cast<std::size_t>(position)])
        throw Error(
            fmt::format("the pool's layout does not hold node {} worker {} (is the pool "
                        "still starting, or is the node not in the world of distributed calls?)",
                        where.node, where.worker));
    RankPlace p = where;
    p.node = position;
    int rank = p.worker, world = 0;
    for (std::size_t n = 0; n < nodes; ++n) {
        world += l.workers[n];
        if (n < static_cast<std::size_t>(p.node)) rank += l.workers[n];
    }
    EnvVars v;
    switch (plugin.kind) {
        case PluginSpec::torch:
        case PluginSpec::transformers:
            add_torch(v, l, p, rank, world, plugin.backend);
            break;
        case PluginSpec::jax:
            add_jax(v, l, rank, world);
            break;
        case PluginSpec::tensorflow:
            add_tensorflow(v, l, rank);
            break;
        case PluginSpec::keras:
            v.emplace_back("KERAS_BACKEND", plugin.backend);
            if (plugin.backend == "torch")
                add_torch(v, l, p, rank, world, {});
            else if (plugin.backend == "tensorflow")
                add_tensorflow(v, l, rank);
            else
                add_jax(v, l, rank, world);
            break;
        default:
            break;
    }
    return v;
}

std::string interface_for_address(const std::string& address) {
    in_addr want{};
    if (::inet_pton(AF_INET, address.c_str(), &want) != 1) {
        addrinfo hints{};
        hints.ai_family = AF_INET;
        addrinfo* res = nullptr;
        if (::getaddrinfo(address.c_str(), nullptr, &hints, &res) != 0 || !res) return {};
        want = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
        ::freeaddrinfo(res);
    }
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) return {};
    std::string found;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_name) continue;
        if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == want.s_addr) {
            found = i->ifa_name;
            break;
        }
    }
    ::freeifaddrs(ifs);
    // 127.0.0.2 and the like live on lo without being listed as its address.
    if (found.empty() && (ntohl(want.s_addr) >> 24) == 127) found = "lo";
    return found;
}

std::vector<std::int32_t> pick_free_ports(int n) {
    std::vector<int> fds;
    std::vector<std::int32_t> ports;
    auto close_all = [&] {
        for (int fd : fds) ::close(fd);
    };
    for (int k = 0; k < n; ++k) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        fds.push_back(fd);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        socklen_t len = sizeof a;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            break;
        ports.push_back(ntohs(a.sin_port));
    }
    const int err = errno;
    close_all();
    if (static_cast<int>(ports.size()) != n)
        throw Error(fmt::format("cannot pick {} free TCP ports: {}", n, std::strerror(err)));
    return ports;
}

namespace {
struct EnvState {
    std::mutex m;
    int users = 0;
    EnvVars current;
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};
EnvState& env_state() {
    static EnvState s;
    return s;
}
}  // namespace

ScopedEnv::ScopedEnv(EnvVars vars) {
    auto& s = env_state();
    std::lock_guard lk(s.m);
    if (s.users > 0) {
        if (s.current != vars)
            throw Error(
                "another distributed call with a different rendezvous is running in this worker "
                "process (PoolSpec::concurrency > 1): the environment is process-wide, so one "
                "distributed job runs at a time per worker process");
        ++s.users;
        return;
    }
    s.saved.clear();
    for (auto& [k, v] : vars) {
        const char* old = std::getenv(k.c_str());
        s.saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
        ::setenv(k.c_str(), v.c_str(), 1);
    }
    s.current = std::move(vars);
    s.users = 1;
}

ScopedEnv::~ScopedEnv() {
    auto& s = env_state();
    std::lock_guard lk(s.m);
    if (--s.users > 0) return;
    for (auto& [k, old] : s.saved) {
        if (old)
            ::setenv(k.c_str(), old->c_str(), 1);
        else
            ::unsetenv(k.c_str());
    }
    s.saved.clear();
    s.current.clear();
}

}  // namespace sky::detail
