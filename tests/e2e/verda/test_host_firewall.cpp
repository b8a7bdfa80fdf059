// sky's host firewall (security review r4 H1, M5), the boot-script part that Verda's nodes run
// before anything of the pool listens: run here in a test host's network namespace, as the
// node's boot runs it, then probed from the client's namespace, from a peer before and after the
// client admits it, and from a stranger. Once with nftables, once with iptables only, once with
// neither (the node then says it has no firewall).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "fakes/verda/fake_verda.hpp"
#include "hosts/test_hosts.hpp"
#include "providers/cloud/host_firewall.hpp"
#include "support/cloud_pool.hpp"
#include "support/network_probe.hpp"

using sky::test::TestHosts;
namespace fs = std::filesystem;

namespace {

using network_probe::client_address;

bool reaches(const std::string& ns, const std::string& address, int port) {
    return network_probe::from_namespace_reaches(ns, address, port);
}

// A scratch directory for the firewall's state, removed with the test.
struct Scratch {
    fs::path dir;
    Scratch() {
        std::string t = (fs::temp_directory_path() / "sky-host-firewall-XXXXXX").string();
        REQUIRE(::mkdtemp(t.data()));
        dir = t;
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

// A PATH with `tools` from /usr/sbin and the usual /usr/bin and /bin: an image whose firewall
// tools are those alone.
std::string path_with(const fs::path& dir, const std::vector<std::string>& tools) {
    fs::create_directories(dir / "bin");
    for (const auto& t : tools) fs::create_symlink("/usr/sbin/" + t, dir / "bin" / t);
    return (dir / "bin").string() + ":/usr/bin:/bin";
}

// Runs the firewall part in host 0's namespace with `path`, SSH allowed from `client`; checks
// who gets through. Returns the kind the part set up.
std::string run_and_probe(TestHosts& hosts, const std::string& path, const std::string& client,
                          bool expect_firewall) {
    Scratch s;
    const std::string state = (s.dir / "fw").string();
    const std::string script = sky::detail::host_firewall_script(client + "/32", state);
    std::ofstream(s.dir / "part.sh") << script;
    auto r = sky::test::run_command({"ip", "netns", "exec", hosts.netns(0), "env", "PATH=" + path,
                                     "bash", (s.dir / "part.sh").string()});
    INFO(r.output);
    REQUIRE(r.status == 0);
    std::string kind;
    std::ifstream(state + "/kind") >> kind;
    // Something of the pool's listening on node 0 (as a rendezvous service would), for up to
    // 70 s: each probe that must not get through waits out its own timeout.
    const fs::path port_file = s.dir / "port";
    auto listener = std::async(std::launch::async, [&] {
        return sky::test::run_command(
            {"ip", "netns", "exec", hosts.netns(0), "python3", "-c",
             "import socket,sys,time\n"
             "s=socket.socket(); s.bind(('0.0.0.0',0)); s.listen(8); s.settimeout(0.5)\n"
             "open(sys.argv[1]+'.tmp','w').write(str(s.getsockname()[1]))\n"
             "import os; os.rename(sys.argv[1]+'.tmp', sys.argv[1])\n"
             "end=time.time()+70\n"
             "while time.time()<end and not os.path.exists(sys.argv[1]+'.stop'):\n"
             "    try: c,_=s.accept(); c.close()\n"
             "    except OSError: pass\n",
             port_file.string()},
            std::chrono::seconds(90));
    });
    REQUIRE(sky::test::wait_until([&] { return fs::exists(port_file); }, std::chrono::seconds(10)));
    int port = 0;
    std::ifstream(port_file) >> port;
    const std::string node = hosts.address(0);
    const int ssh = hosts.port(0);
    if (expect_firewall) {
        // The client: SSH, nothing else.
        CHECK(reaches("", node, ssh));
        CHECK_FALSE(reaches("", node, port));
        // A peer before the client admits it, and a stranger: nothing at all.
        CHECK_FALSE(reaches(hosts.netns(1), node, port));
        CHECK_FALSE(reaches(hosts.netns(1), node, ssh));
        CHECK_FALSE(reaches(hosts.netns(2), node, port));
        // The client admits the pool's other node (as RemoteNode does over SSH).
        auto admit =
            sky::test::run_command({"ip", "netns", "exec", hosts.netns(0), "env", "PATH=" + path,
                                    "sh", state + "/admit-peers", hosts.address(1)});
        INFO(admit.output);
        CHECK(admit.status == 0);
        CHECK(admit.output.rfind(kind, 0) == 0);
        CHECK(reaches(hosts.netns(1), node, port));
        CHECK(reaches(hosts.netns(1), node, ssh));
        // The stranger still gets nothing; node 0 still reaches out (the answers come back).
        CHECK_FALSE(reaches(hosts.netns(2), node, port));
        CHECK_FALSE(reaches(hosts.netns(2), node, ssh));
        CHECK(reaches(hosts.netns(0), hosts.address(2), ssh));
        // The peer leaves the pool (replaced, released): the client has node 0 forget it,
        // since its address may be another customer's next. Forgetting one that is not there,
        // twice, is no error; an address forgotten and admitted in one call stays in.
        const auto admit_with = [&](std::vector<std::string> args) {
            std::vector<std::string> argv{"ip",  "netns",        "exec", hosts.netns(0),
                                          "env", "PATH=" + path, "sh",   state + "/admit-peers"};
            argv.insert(argv.end(), args.begin(), args.end());
            return sky::test::run_command(argv);
        };
        auto forget = admit_with({"-" + hosts.address(1)});
        INFO(forget.output);
        CHECK(forget.status == 0);
        CHECK_FALSE(reaches(hosts.netns(1), node, port));
        CHECK_FALSE(reaches(hosts.netns(1), node, ssh));
        auto again = admit_with({"-" + hosts.address(1), "-" + hosts.address(2)});
        INFO(again.output);
        CHECK(again.status == 0);
        CHECK_FALSE(reaches(hosts.netns(1), node, port));
        auto both = admit_with({"-" + hosts.address(1), hosts.address(1)});
        INFO(both.output);
        CHECK(both.status == 0);
        CHECK(reaches(hosts.netns(1), node, port));
        CHECK_FALSE(reaches(hosts.netns(2), node, port));
    } else {
        CHECK(reaches(hosts.netns(2), node, port));  // open, as the node then says
        auto admit =
            sky::test::run_command({"ip", "netns", "exec", hosts.netns(0), "env", "PATH=" + path,
                                    "sh", state + "/admit-peers", hosts.address(1)});
        CHECK(admit.status != 0);
        CHECK(admit.output.rfind("none", 0) == 0);
    }
    std::ofstream(port_file.string() + ".stop") << "";
    listener.get();
    return kind;
}

}  // namespace

TEST_CASE(
    "verda security: the host firewall (nftables) lets in SSH from the client, every port "
    "from admitted peers until they are forgotten, nothing from strangers",
    "[verda][security]") {
    SKIP_WITHOUT_HOSTS();
    if (sky::test::run_command({"nft", "--version"}).status != 0) {
        WARN("skipped: nft is not installed here (apt-get install nftables)");
        return;
    }
    TestHosts hosts(3);
    Scratch bin;
    CHECK(run_and_probe(hosts, path_with(bin.dir, {"nft", "iptables", "ip6tables"}),
                        client_address(hosts), true) == "nft");
}

TEST_CASE("verda security: on an image without nft, the host firewall is iptables, and forgets",
          "[verda][security]") {
    SKIP_WITHOUT_HOSTS();
    if (sky::test::run_command({"iptables", "--version"}).status != 0) {
        WARN("skipped: iptables is not installed here (apt-get install iptables)");
        return;
    }
    TestHosts hosts(3);
    Scratch bin;
    CHECK(run_and_probe(hosts, path_with(bin.dir, {"iptables", "ip6tables"}), client_address(hosts),
                        true) == "iptables");
}

TEST_CASE("verda security: on an image with neither, the node has no firewall and says so",
          "[verda][security]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(3);
    Scratch bin;
    CHECK(run_and_probe(hosts, path_with(bin.dir, {}), client_address(hosts), false) == "none");
}

// ---------------------------------------------------------------------------------------------
// A Verda pool on the fake Verda, whose instances' boot plays the host firewall part: the
// pool's nodes reach each other on any port once the client has admitted them, a stranger on
// the same network reaches nothing, the client only SSH.

TEST_CASE(
    "verda security: a pool's nodes admit each other through their host firewalls, and "
    "nobody else",
    "[verda][security]") {
    SKIP_WITHOUT_HOSTS();
    if (sky::test::run_command({"nft", "--version"}).status != 0) {
        WARN("skipped: nft is not installed here (apt-get install nftables)");
        return;
    }
    const std::string id = "verda-fw-client", secret = "verda-fw-secret-2b7f01aa";
    sky::test::CloudOnHosts<sky::test::FakeVerda> cloud(
        3, {{"VERDA_CLIENT_ID", id}, {"VERDA_CLIENT_SECRET", secret}}, secret,
        sky::test::FakeVerdaOptions{.client_id = id, .client_secret = secret});
    const std::string client = network_probe::client_address(cloud.hosts);
    sky::test::ScopedEnv cidr({{"SKY_CLIENT_CIDR", client}});
    {
        auto spec = cloud.pool_spec(sky::Verda{.endpoint = cloud.fake.endpoint()}, 2, "H100");
        std::mutex m;
        std::vector<std::string> errors;
        spec.on_event = [&, recorded = spec.on_event](const sky::Event& e) {
            if (const auto* x = std::get_if<sky::ErrorEvent>(&e)) {
                std::lock_guard lk(m);
                errors.push_back(x->message);
            }
            return recorded(e);
        };
        sky::ComputePool pool{spec};
        // Every node's boot set up the firewall (no node said it has none).
        {
            std::lock_guard lk(m);
            for (const auto& text : errors) {
                INFO(text);
                CHECK(text.find("firewall") == std::string::npos);
            }
        }
        const auto ports = sky::compute<network_probe::listen_for>(30) | pool;
        REQUIRE(ports.size() == 2);
        std::vector<std::string> addresses;
        for (const auto& i : pool.instances()) addresses.push_back(i.private_ip.value_or(""));
        REQUIRE(addresses.size() == 2);
        for (int target = 0; target < 2; ++target)
            for (bool ok :
                 sky::compute<network_probe::reaches>(addresses[target], ports[target]) | pool)
                CHECK(ok);
        int stranger = -1;  // the host no instance runs on
        for (int h = 0; h < 3; ++h)
            if (cloud.hosts.address(h) != addresses[0] && cloud.hosts.address(h) != addresses[1])
                stranger = h;
        REQUIRE(stranger >= 0);
        for (int node = 0; node < 2; ++node) {
            INFO("node " << node << " at " << addresses[node]);
            CHECK_FALSE(network_probe::from_namespace_reaches(cloud.hosts.netns(stranger),
                                                              addresses[node], ports[node]));
            CHECK_FALSE(network_probe::from_namespace_reaches(
                cloud.hosts.netns(stranger), addresses[node], cloud.hosts.port(0)));
            CHECK(network_probe::from_namespace_reaches("", addresses[node], cloud.hosts.port(0)));
            CHECK_FALSE(network_probe::from_namespace_reaches("", addresses[node], ports[node]));
        }
    }
    cloud.check_nothing_left();
}
