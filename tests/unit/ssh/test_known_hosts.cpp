// known_hosts: a key marked @revoked is never accepted, whatever other line lists it; over a real
// sshd (a test host), a connection pinned by such a file is refused.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hosts/test_hosts.hpp"
#include "ssh/host_key.hpp"
#include "ssh/session.hpp"
#include "util/encoding.hpp"

using namespace sky::detail::ssh;
namespace fs = std::filesystem;

namespace {

std::string fake_key(unsigned char seed) {
    std::vector<unsigned char> blob(51);
    for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<unsigned char>(seed + i);
    return "ssh-ed25519 " + sky::detail::base64_encode(std::string(blob.begin(), blob.end()));
}

fs::path write_temp(const std::string& name, const std::string& text) {
    fs::path p = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::ofstream(p) << text;
    return p;
}

}  // namespace

TEST_CASE("known_hosts: @revoked removes a key that another line accepts", "[ssh][hygiene]") {
    const std::string a = fake_key(1), b = fake_key(2);
    const auto fa = fingerprint_of_public_key(a), fb = fingerprint_of_public_key(b);
    auto file = write_temp("sky-known-hosts-revoked", "10.0.0.5 " + a +
                                                          "\n"
                                                          "10.0.0.5 " +
                                                          b +
                                                          "\n"
                                                          "@revoked * " +
                                                          a +
                                                          " old key\n"
                                                          "[10.0.0.6]:2222 " +
                                                          a + "\n");
    auto keys = known_hosts_entries(file, "10.0.0.5", 22);
    REQUIRE(keys.size() == 1);
    CHECK(keys[0].fingerprint == fb);
    // The revocation holds for every host, also one on another port.
    CHECK(known_hosts_entries(file, "10.0.0.6", 2222).empty());
    auto revoked = known_hosts_revoked(file);
    REQUIRE(revoked.size() == 1);
    CHECK(revoked[0] == fa);
    fs::remove(file);

    // Without the @revoked line both keys count.
    file = write_temp("sky-known-hosts-plain", "10.0.0.5 " + a + "\n10.0.0.5 " + b + "\n");
    CHECK(known_hosts_entries(file, "10.0.0.5", 22).size() == 2);
    CHECK(known_hosts_revoked(file).empty());
    fs::remove(file);
}

TEST_CASE("known_hosts: a revoked host key is refused by a real connection", "[ssh][hygiene]") {
    SKIP_WITHOUT_HOSTS();
    sky::test::TestHosts hosts(1);
    const std::string key = hosts.host_public_key(0);
    auto file = hosts.dir() / "known_hosts_revoked";
    std::ofstream(file) << "@revoked * " << key << "\n" << hosts.known_hosts_line(0) << "\n";
    SessionOptions o;
    o.host = hosts.address(0);
    o.user = hosts.user();
    o.private_key_file = hosts.client_key_path();
    o.host_key = HostKeyPin::known_hosts(file);
    o.connect_attempts = 1;
    try {
        Session s(o);
        FAIL("connected to a host whose key is revoked");
    } catch (const HostKeyMismatch& e) {
        CHECK(e.actual() == hosts.host_key_fingerprint(0));
        CHECK(e.expected().empty());
        CHECK(std::string(e.what()).find("marked @revoked") != std::string::npos);
    }
    // The same file without the revocation connects.
    std::ofstream(file) << hosts.known_hosts_line(0) << "\n";
    Session ok(o);
    CHECK(ok.exec("true").exit_status == 0);
}
