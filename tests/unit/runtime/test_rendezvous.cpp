// The rendezvous variables of every plugin, the environment scope, and plugin call frames.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/protocol.hpp"
#include "runtime/rendezvous.hpp"
#include "sky/sky.hpp"

using namespace sky::detail;

namespace {
// 2 nodes with 2 workers each, node 1 at 10.0.0.2.
PoolLayout two_by_two() {
    PoolLayout l;
    l.peers = {"10.0.0.1", "10.0.0.2"};
    l.workers = {2, 2};
    l.ports = {{29500, 29501}, {40000, 40001}};
    return l;
}
std::string get(const EnvVars& v, const std::string& k) {
    for (auto& [a, b] : v)
        if (a == k) return b;
    return "<unset>";
}
}  // namespace

TEST_CASE("torch variables: rank = node x W + worker, the head's first port", "[distributed]") {
    auto v = rendezvous_env(make_plugin(PluginSpec::torch, "gloo"), two_by_two(), {1, 1, "eth0"});
    CHECK(get(v, "MASTER_ADDR") == "10.0.0.1");
    CHECK(get(v, "MASTER_PORT") == "29500");
    CHECK(get(v, "WORLD_SIZE") == "4");
    CHECK(get(v, "RANK") == "3");
    CHECK(get(v, "LOCAL_RANK") == "1");
    CHECK(get(v, "LOCAL_WORLD_SIZE") == "2");
    CHECK(get(v, "NODE_RANK") == "1");
    CHECK(get(v, "GLOO_SOCKET_IFNAME") == "eth0");
    CHECK(get(v, "NCCL_SOCKET_IFNAME") == "eth0");
    CHECK(get(v, "SKY_DISTRIBUTED_BACKEND") == "gloo");
    // No interface known: the *_SOCKET_IFNAME variables stay unset.
    auto w =
        rendezvous_env(make_plugin(PluginSpec::transformers, "nccl"), two_by_two(), {0, 0, ""});
    CHECK(get(w, "GLOO_SOCKET_IFNAME") == "<unset>");
    CHECK(get(w, "RANK") == "0");
}

TEST_CASE("jax, tensorflow and keras variables", "[distributed]") {
    auto j = rendezvous_env(make_plugin(PluginSpec::jax, ""), two_by_two(), {1, 0, "eth0"});
    CHECK(get(j, "JAX_COORDINATOR_ADDRESS") == "10.0.0.1:29500");
    CHECK(get(j, "JAX_NUM_PROCESSES") == "4");
    CHECK(get(j, "JAX_PROCESS_ID") == "2");
    CHECK(get(j, "MASTER_ADDR") == "<unset>");

    auto t = rendezvous_env(make_plugin(PluginSpec::tensorflow, ""), two_by_two(), {0, 1, ""});
    auto tf = nlohmann::json::parse(get(t, "TF_CONFIG"));
    CHECK(tf["cluster"]["worker"] == nlohmann::json::array({"10.0.0.1:29500", "10.0.0.1:29501",
                                                            "10.0.0.2:40000", "10.0.0.2:40001"}));
    CHECK(tf["task"]["type"] == "worker");
    CHECK(tf["task"]["index"] == 1);

    auto k = rendezvous_env(make_plugin(PluginSpec::keras, "torch"), two_by_two(), {0, 1, "lo"});
    CHECK(get(k, "KERAS_BACKEND") == "torch");
    CHECK(get(k, "RANK") == "1");
    CHECK(get(k, "SKY_DISTRIBUTED_BACKEND") == "<unset>");
    auto kt =
        rendezvous_env(make_plugin(PluginSpec::keras, "tensorflow"), two_by_two(), {0, 0, ""});
    CHECK(get(kt, "TF_CONFIG") != "<unset>");
    auto kj = rendezvous_env(make_plugin(PluginSpec::keras, "jax"), two_by_two(), {0, 0, ""});
    CHECK(get(kj, "JAX_PROCESS_ID") == "0");
}

TEST_CASE("a world of nodes 0 and 2 ranks node 2 second: NODE_RANK is its position",
          "[distributed]") {
    auto l = two_by_two();
    l.nodes = {0, 2};
    auto v = rendezvous_env(make_plugin(PluginSpec::torch, "gloo"), l, {2, 1, ""});
    CHECK(get(v, "WORLD_SIZE") == "4");
    CHECK(get(v, "RANK") == "3");
    CHECK(get(v, "NODE_RANK") == "1");
    CHECK(get(v, "LOCAL_WORLD_SIZE") == "2");
    CHECK(get(v, "MASTER_ADDR") == "10.0.0.1");
    auto t = rendezvous_env(make_plugin(PluginSpec::tensorflow, ""), l, {2, 0, ""});
    auto tf = nlohmann::json::parse(get(t, "TF_CONFIG"));
    CHECK(tf["cluster"]["worker"][2] == "10.0.0.2:40000");  // node 2's own address and port
    CHECK(tf["task"]["index"] == 2);
    // Node 1 is not in this world, and a node list that does not match the peers is refused.
    CHECK_THROWS_AS(rendezvous_env(make_plugin(PluginSpec::jax, ""), l, {1, 0, ""}), sky::Error);
    l.nodes = {0};
    CHECK_THROWS_AS(rendezvous_env(make_plugin(PluginSpec::jax, ""), l, {0, 0, ""}), sky::Error);
}

TEST_CASE("a layout that does not hold the rank is an error, not a guess", "[distributed]") {
    auto p = make_plugin(PluginSpec::torch, "nccl");
    CHECK_THROWS_AS(rendezvous_env(p, PoolLayout{}, {0, 0, ""}), sky::Error);
    CHECK_THROWS_AS(rendezvous_env(p, two_by_two(), {2, 0, ""}), sky::Error);
    CHECK_THROWS_AS(rendezvous_env(p, two_by_two(), {0, 2, ""}), sky::Error);
    auto bad = two_by_two();
    bad.ports[1].pop_back();
    CHECK_THROWS_AS(rendezvous_env(p, bad, {0, 0, ""}), sky::Error);
}

TEST_CASE("plugins check their backend", "[distributed]") {
    CHECK_THROWS_AS(make_plugin(PluginSpec::torch, "tcp"), sky::ConfigError);
    CHECK_THROWS_AS(make_plugin(PluginSpec::transformers, ""), sky::ConfigError);
    CHECK_THROWS_AS(make_plugin(PluginSpec::keras, "mxnet"), sky::ConfigError);
    CHECK(make_plugin(PluginSpec::jax, "ignored").backend.empty());
    CHECK(plugin_spec(sky::distributed::torch{}).backend == "nccl");
    CHECK(plugin_spec(sky::distributed::keras{}).backend == "jax");
}

TEST_CASE("ScopedEnv sets for its lifetime, restores values and absence, refuses a clash",
          "[distributed]") {
    ::setenv("SKY_TEST_A", "before", 1);
    ::unsetenv("SKY_TEST_B");
    {
        ScopedEnv e({{"SKY_TEST_A", "1"}, {"SKY_TEST_B", "2"}});
        CHECK(std::string(std::getenv("SKY_TEST_A")) == "1");
        CHECK(std::string(std::getenv("SKY_TEST_B")) == "2");
        {
            ScopedEnv same({{"SKY_TEST_A", "1"}, {"SKY_TEST_B", "2"}});  // shared
            CHECK_THROWS_AS(ScopedEnv(EnvVars{{"SKY_TEST_A", "other"}}), sky::Error);
        }
        CHECK(std::string(std::getenv("SKY_TEST_A")) == "1");  // still held by the first
    }
    CHECK(std::string(std::getenv("SKY_TEST_A")) == "before");
    CHECK(std::getenv("SKY_TEST_B") == nullptr);
    ::unsetenv("SKY_TEST_A");
}

TEST_CASE("interfaces and free ports", "[distributed]") {
    CHECK(interface_for_address("127.0.0.1") == "lo");
    CHECK(interface_for_address("localhost") == "lo");
    CHECK(interface_for_address("192.0.2.77").empty());  // TEST-NET-1: nobody's address
    auto ports = pick_free_ports(8);
    REQUIRE(ports.size() == 8);
    CHECK(std::set<std::int32_t>(ports.begin(), ports.end()).size() == 8);
    for (auto p : ports) CHECK(p > 0);
}

TEST_CASE("a call frame's plugin block: round trip, 8-byte alignment, malformed blocks",
          "[distributed][frames]") {
    Buffer b;
    append_call_plugin(b, {PluginSpec::keras, "torch", 3});
    CHECK(b.size() % 8 == 0);
    append_call_header(b, "ns::train", 42);
    CallPlugin got;
    auto rest = decode_call_plugin(b.span(), call_flag_plugin, got);
    CHECK(got.kind == PluginSpec::keras);
    CHECK(got.backend == "torch");
    CHECK(got.worker == 3);
    auto c = decode_call(rest);
    CHECK(c.function == "ns::train");
    CHECK(c.signature == 42);
    // Without the flag the payload is a plain call.
    CallPlugin none;
    CHECK(decode_call_plugin(b.span(), 0, none).size() == b.size());
    CHECK(none.kind == 0);
    // A block length past the payload, or a block that does not decode.
    Buffer huge;
    std::uint32_t n = 1u << 30;
    huge.append(&n, 4);
    CHECK_THROWS_AS(decode_call_plugin(huge.span(), call_flag_plugin, got), sky::ProtocolError);
    Buffer junk;
    std::uint32_t four = 4;
    junk.append(&four, 4);
    junk.append("\xff\xff\xff\xff", 4);
    CHECK_THROWS_AS(decode_call_plugin(junk.span(), call_flag_plugin, got), sky::ProtocolError);
}

TEST_CASE("PendingCompute keeps its plugin through serialization", "[distributed]") {
    CallDesc d;
    d.function = "f";
    d.signature = 7;
    d.args = std::make_shared<Buffer>();
    sky::PendingCompute<int> p(std::move(d));
    auto q = p.with(sky::distributed::torch{.backend = "gloo"});
    Buffer b;
    save_to(b, q);
    sky::PendingCompute<int> r;
    load_from(b.span(), r);
    CHECK(r.desc().options.plugin == q.desc().options.plugin);
    CHECK(r.desc().options.plugin.backend == "gloo");
}
