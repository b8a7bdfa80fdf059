// The host binding: keys read from a real sky boot script (no root needed), and, on test hosts
// (root), a booted machine serving the pinned key and authorizing the client's, and a released
// one running nothing.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "fakes/common/host_binding.hpp"
#include "hosts/test_hosts.hpp"
#include "providers/cloud/node_keys.hpp"

namespace fs = std::filesystem;
using sky::test::HostBinding;
using sky::test::TestHosts;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/sky-binding-test-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string read_file(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

}  // namespace

TEST_CASE("host binding: the keys of a sky boot script", "[fake][binding]") {
    TempDir dir;
    auto key = sky::detail::make_host_key(dir.path, "host0");
    const std::string script = sky::detail::boot_script(
        {.pool_id = "p1", .host_key = key, .authorized_key = "ssh-ed25519 AAAAC3Nz client"});
    auto keys = sky::test::parse_boot_script(script);
    CHECK(trimmed(keys.host_private_key) == trimmed(key.private_key));
    CHECK(keys.host_public_key == key.public_key);
    CHECK(keys.authorized_key == "ssh-ed25519 AAAAC3Nz client");

    auto none = sky::test::parse_boot_script("#!/bin/bash\necho hello\n");
    CHECK(none.host_private_key.empty());
    CHECK(none.host_public_key.empty());
    CHECK(none.authorized_key.empty());
    // An unterminated heredoc is no key.
    CHECK(sky::test::parse_boot_script("cat <<'SKY_HOST_KEY'\nabc").host_private_key.empty());
}

TEST_CASE("host binding: a booted host serves the pinned key, a released one nothing",
          "[fake][binding][hosts]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    TempDir dir;
    auto key = sky::detail::make_host_key(dir.path, "host");
    const std::string script = sky::detail::boot_script({.pool_id = "p1", .host_key = key});
    const std::string client_pub = trimmed(read_file(hosts.client_key_path().string() + ".pub"));
    {
        HostBinding binding(hosts);
        CHECK(binding.free_host() == 0);
        auto h = binding.boot_any("m-a", script, client_pub);
        REQUIRE(h == 0);
        CHECK(binding.host_of("m-a") == 0);
        CHECK(binding.free_host() == 1);
        CHECK_THROWS_AS(binding.boot("m-b", 0, script, client_pub), std::logic_error);
        CHECK(hosts.host_public_key(0) == key.public_key);

        // OpenSSH pinning exactly the boot script's key logs in with the authorized client key.
        std::ofstream(dir.path / "known_hosts")
            << hosts.address(0) << " " << key.public_key << "\n";
        auto ssh = [&] {
            return sky::test::run_command(
                {"ssh", "-i", hosts.client_key_path().string(), "-o",
                 "UserKnownHostsFile=" + (dir.path / "known_hosts").string(), "-o",
                 "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-p",
                 std::to_string(hosts.port(0)), "root@" + hosts.address(0), "echo up"});
        };
        auto r = ssh();
        INFO(r.output << hosts.sshd_log(0));
        CHECK(r.status == 0);
        CHECK(r.output.find("up") != std::string::npos);

        binding.release("m-a");
        CHECK_FALSE(binding.host_of("m-a").has_value());
        CHECK(binding.free_host() == 0);
        CHECK(ssh().status != 0);  // nothing runs on a released machine

        // A boot script without a key: the host keeps its own.
        REQUIRE(binding.boot_any("m-c", "#!/bin/bash\n", client_pub) == 0);
        CHECK(hosts.host_public_key(0) != key.public_key);
        CHECK(binding.machines() == std::vector<std::string>{"m-c"});
    }
}
