// sky::SSH against an unprivileged user on the nodes (review C1, H2): a process running as
// nobody on each test host races to connect to every new listening socket and reads every
// process's command line while a pool runs. It must reach no worker, get no byte from any
// socket of the pool, and see no secret; the client must get only true results.
#include <openssl/rand.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::TestHosts;

namespace ssh_security {
long sum_to(int n) {
    long s = 0;
    for (int i = 1; i <= n; ++i) s += i;
    return s;
}
std::string secret_seen() {
    const char* v = std::getenv("SKY_TEST_SECRET");
    return v ? v : "";
}
}  // namespace ssh_security

namespace {

std::string random_secret() {
    unsigned char b[16];
    REQUIRE(RAND_bytes(b, sizeof b) == 1);
    std::string s = "sky-secret-";
    for (auto c : b) s += "0123456789abcdef"[c & 15];
    return s;
}

}  // namespace

TEST_CASE("ssh security: a local user on the nodes reaches no worker and reads no secret",
          "[ssh_pool][security]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    const std::string secret = random_secret();
    for (int i = 0; i < hosts.size(); ++i) {
        std::filesystem::copy_file(SKY_ATTACKER_SCRIPT, hosts.host_path(i, "/tmp/attacker.py"));
        std::ofstream(hosts.host_path(i, "/tmp/attacker-secret")) << secret << "\n";
        std::filesystem::permissions(
            hosts.host_path(i, "/tmp/attacker-secret"),
            std::filesystem::perms::owner_read | std::filesystem::perms::others_read);
    }
    std::vector<std::future<sky::test::CommandResult>> attackers;
    for (int i = 0; i < hosts.size(); ++i)
        attackers.push_back(std::async(std::launch::async, [&hosts, i] {
            return sky::test::run_command(
                hosts.ssh_command(i,
                                  "setpriv --reuid=65534 --regid=65534 --clear-groups "
                                  "/usr/bin/python3 /tmp/attacker.py 120 /tmp/attacker-secret "
                                  "/tmp/attacker-stop"),
                std::chrono::seconds(150));
        }));
    // The attackers watch until both pools are done, however long they take on a loaded
    // machine (a fixed 12 s ended before the pools' sockets appeared), or until the test fails.
    struct Stop {
        TestHosts& hosts;
        explicit Stop(TestHosts& h) : hosts(h) {}
        Stop(const Stop&) = delete;
        ~Stop() {
            for (int i = 0; i < hosts.size(); ++i)
                std::ofstream(hosts.host_path(i, "/tmp/attacker-stop")) << "stop\n";
        }
    };
    std::optional<Stop> stop_attackers;
    stop_attackers.emplace(hosts);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the attackers are watching

    sky::SSH ssh = sky::test::ssh_provider(hosts);
    for (int pools = 0; pools < 2; ++pools) {  // two pools: more worker sockets to race for
        sky::ComputePool pool{{.provider = ssh,
                               .nodes = 2,
                               .env = {{"SKY_TEST_SECRET", secret}},
                               .display = sky::Display::quiet}};
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        int rounds = 0;
        while (std::chrono::steady_clock::now() < deadline && rounds < 1000) {
            for (long v : sky::compute<ssh_security::sum_to>(100) | pool) CHECK(v == 5050);
            ++rounds;
        }
        for (auto& s : sky::compute<ssh_security::secret_seen>() | pool) CHECK(s == secret);
    }
    stop_attackers.reset();
    bool saw_worker = false;
    std::vector<std::string> outputs;
    for (auto& a : attackers) {
        auto r = a.get();
        outputs.push_back(r.output);
        INFO(r.output);
        REQUIRE(r.output.find("attacker uid=65534") != std::string::npos);
        REQUIRE(r.output.find("attacker done") != std::string::npos);
        if (r.output.find("worker.sock") != std::string::npos) saw_worker = true;
        CHECK(r.output.find("connected unix:") == std::string::npos);
        CHECK(r.output.find("secret-in-ps") == std::string::npos);
        // A TCP listener of the pool (the file server that feeds peers) may accept it, but
        // sends nothing without the transfer token.
        std::istringstream is(r.output);
        for (std::string l; std::getline(is, l);)
            if (l.rfind("connected tcp:", 0) == 0) CHECK(l.find("bytes=0") != std::string::npos);
    }
    // The race was run: an attacker saw a worker's socket appear, and the file system refused it.
    for (const auto& o : outputs) UNSCOPED_INFO(o);
    CHECK(saw_worker);
}
