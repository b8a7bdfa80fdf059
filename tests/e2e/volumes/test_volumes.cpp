// Volumes end to end: sky::SSH pools on test hosts (network namespaces with a real sshd each)
// mount buckets of a real S3-compatible server (npm's s3rver) that this test starts on the
// hosts' bridge, with s3fs from Debian on the hosts. Needs root, s3fs, /dev/fuse and s3rver;
// skips (saying which is missing) otherwise.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

#include "e2e/volumes/s3_server.hpp"
#include "fakes/ec2/fake_ec2.hpp"
#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"
#include "support/proc_file.hpp"

extern char** environ;
using sky::test::TestHosts;
using volumes_test::S3Server;
namespace fs = std::filesystem;

namespace volumes_test {

// What runs on the nodes.
std::string read_file(std::string path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "<cannot open " + path + ": " + std::strerror(errno) + ">";
    return std::string(std::istreambuf_iterator<char>(in), {});
}
// 0, or the errno of the first step that failed.
int write_file(std::string path, std::string content) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return errno;
    ssize_t n = ::write(fd, content.data(), content.size());
    int err = n == static_cast<ssize_t>(content.size()) ? 0 : (n < 0 ? errno : EIO);
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
}
std::string checkpoint_name(int step) {
    return "step-" + std::to_string(step) + "-node-" + std::to_string(sky::instance_info().node) +
           ".ckpt";
}
// The seeds' usage: read the dataset, train a little, save a checkpoint per node.
std::string train_and_checkpoint(std::string dataset, std::string checkpoint_dir) {
    const std::string data = read_file(dataset);
    const std::string name = checkpoint_name(1);
    const std::string ckpt = "weights after " + std::to_string(data.size()) + " bytes";
    int err = write_file(checkpoint_dir + "/" + name, ckpt);
    return err == 0 ? name : "<write failed: " + std::string(std::strerror(err)) + ">";
}

}  // namespace volumes_test

using namespace volumes_test;

namespace {

// Skips (true) where this machine cannot run the volume tests, saying why.
bool skip_without_volumes() {
    std::string why;
    if (!TestHosts::available(&why)) {
        WARN("skipped: " << why);
        return true;
    }
    if (::access("/usr/bin/s3fs", X_OK) != 0) {
        WARN("skipped: s3fs is not installed (apt-get install s3fs; scripts/install-deps.sh)");
        return true;
    }
    if (::access("/dev/fuse", R_OK | W_OK) != 0) {
        WARN("skipped: no usable /dev/fuse here: FUSE mounts are impossible");
        return true;
    }
    if (S3Server::program(&why).empty()) {
        WARN("skipped: " << why);
        return true;
    }
    return false;
}

// The root namespace's address on the hosts' bridge (test_hosts gives the bridge .1).
std::string bridge_address(const TestHosts& h) {
    std::string a = h.address(0);
    return a.substr(0, a.rfind('.')) + ".1";
}

// The volumes carry s3rver's keys as their own (S3Volume::access_key_id ...; the example and
// the orphan client take them from S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY); the pool has no AWS
// credentials at all. s3rver's endpoint is plain http on the bridge.
void use_s3rver_credentials() {
    ::setenv("S3_ACCESS_KEY_ID", S3Server::access_key_id, 1);
    ::setenv("S3_SECRET_ACCESS_KEY", S3Server::secret_access_key, 1);
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    ::unsetenv("AWS_SESSION_TOKEN");
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
    ::setenv("SKY_ALLOW_INSECURE_ENDPOINT", "1", 1);
}

// A volume of the test's S3 server with s3rver's keys as its own.
sky::S3Volume s3rver_volume(sky::S3Volume v) {
    v.access_key_id = S3Server::access_key_id;
    v.secret_access_key = S3Server::secret_access_key;
    return v;
}

sky::PoolSpec spec_for(const TestHosts& h, int nodes) {
    sky::SSH ssh = sky::test::ssh_provider(h);
    return {.provider = ssh, .nodes = nodes, .display = sky::Display::quiet};
}

// Command lines of this machine's processes (the hosts share its process table).
std::vector<std::string> command_lines() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string c = sky::test::read_proc_file(e.path() / "cmdline");
        for (char& ch : c)
            if (ch == '\0') ch = ' ';
        if (!c.empty()) out.push_back(c);
    }
    return out;
}

// s3fs processes mounting from this endpoint.
int s3fs_processes(const std::string& endpoint) {
    int n = 0;
    for (const auto& c : command_lines())
        if (c.rfind("s3fs ", 0) == 0 && c.find("url=" + endpoint) != std::string::npos) ++n;
    return n;
}

// The environments of the s3fs processes mounting from this endpoint.
std::vector<std::string> s3fs_environments(const std::string& endpoint) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
        std::string c = sky::test::read_proc_file(e.path() / "cmdline");
        if (c.rfind(std::string("s3fs\0", 5), 0) != 0 ||
            c.find("url=" + endpoint) == std::string::npos)
            continue;
        out.push_back(sky::test::read_proc_file(e.path() / "environ"));
    }
    return out;
}

// s3fs mounts in host i's own mount namespace.
int host_mounts(const TestHosts& h, int i) {
    auto r =
        sky::test::run_command(h.ssh_command(i, "grep -c ' fuse.s3fs ' /proc/self/mounts || true"));
    INFO(r.output);
    REQUIRE(r.status == 0);
    return std::atoi(r.output.c_str());
}

// Credentials files (`credentials`, `credentials.<i>`) in host i's ~/.sky (where a pool's run
// directories are).
int host_credential_files(const TestHosts& h, int i) {
    int n = 0;
    std::error_code ec;
    const fs::path root = h.host_path(i, "/root/.sky");
    for (auto it = fs::recursive_directory_iterator(root, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->path().filename().string().rfind("credentials", 0) == 0) ++n;
    return n;
}

const std::string kDataset = "x,y\n1,2\n3,4\n5,6\n";

}  // namespace

TEST_CASE(
    "volumes: a dataset read from a read-only volume and a checkpoint written to a "
    "writable one that the client sees in the bucket and all unmounted at the end",
    "[volumes]") {
    if (skip_without_volumes()) return;
    TestHosts hosts(2);
    S3Server s3(bridge_address(hosts), {"sky-datasets", "sky-checkpoints"});
    s3.put("sky-datasets", "datasets/train.csv", kDataset);
    use_s3rver_credentials();
    // The volumes have no keys of their own: sky mints scoped, temporary ones with STS (the fake
    // EC2's, which hands out s3rver's keys with a session token) from the pool's AWS keys, which
    // must never reach a node.
    const std::string session_token = "sky-e2e-session-token-7f3a9c";
    sky::test::FakeEc2Options sts_options;
    sts_options.access_key_id = "AKIDPOOLLAUNCHKEY000";
    sts_options.secret_access_key = "pool/launch/secret/NEVER/ON/A/NODE00000";  // made up
    sts_options.model_path = std::string(SKY_TESTDATA_DIR) + "/ec2-model/service-2.json";
    sts_options.sts_issued = {S3Server::access_key_id, S3Server::secret_access_key, session_token};
    sky::test::FakeEc2 sts(sts_options);
    ::setenv("AWS_ACCESS_KEY_ID", sts_options.access_key_id.c_str(), 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", sts_options.secret_access_key.c_str(), 1);
    ::setenv("AWS_ENDPOINT_URL_STS", sts.endpoint().c_str(), 1);

    auto spec = spec_for(hosts, 2);
    spec.volumes = {sky::S3Volume{.mount_path = "/root/data",
                                  .bucket = "sky-datasets",
                                  .prefix = "datasets/",
                                  .read_only = true,
                                  .endpoint = s3.endpoint()},
                    sky::S3Volume{.mount_path = "/root/checkpoints",
                                  .bucket = "sky-checkpoints",
                                  .prefix = "run-1/",
                                  .read_only = false,
                                  .endpoint = s3.endpoint()}};
    std::mutex m;
    std::vector<std::string> steps;  // the bootstrap steps of the first node heard of, in order
    std::string first;
    // When each node entered its volumes and worker phases (reported, never asserted).
    std::map<std::string, std::map<std::string, std::chrono::steady_clock::time_point>> at_step;
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* p = std::get_if<sky::BootstrapProgress>(&e); p && p->bytes_total == 0) {
            std::lock_guard lk(m);
            at_step[p->instance_id].emplace(p->step, std::chrono::steady_clock::now());
            if (first.empty()) first = p->instance_id;
            if (p->instance_id == first && (steps.empty() || steps.back() != p->step))
                steps.push_back(p->step);
        }
        return std::nullopt;
    };
    {
        sky::ComputePool pool{spec};
        {
            std::lock_guard lk(m);
            auto at = [&](const std::string& s) {
                return std::find(steps.begin(), steps.end(), s) - steps.begin();
            };
            std::string all;
            for (const auto& s : steps) all += s + " ";
            INFO("bootstrap steps: " << all);
            CHECK(at("volumes") < static_cast<long>(steps.size()));
            CHECK(at("volumes") < at("worker"));
            for (auto& [id, t] : at_step)
                if (t.count("volumes") && t.count("worker"))
                    std::cout << "measured: the volumes phase (2 s3fs mounts) took "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(t["worker"] -
                                                                                       t["volumes"])
                                     .count()
                              << " ms on " << id << "\n";
        }
        // Every node reads the dataset from the read-only volume.
        auto read = sky::compute<read_file>(std::string("/root/data/train.csv")) | pool;
        REQUIRE(read.size() == 2);
        for (const auto& r : read) CHECK(r == kDataset);
        // ... and writes a checkpoint to the writable one, which lands in the bucket.
        auto names = sky::compute<train_and_checkpoint>(std::string("/root/data/train.csv"),
                                                        std::string("/root/checkpoints")) |
                     pool;
        REQUIRE(names.size() == 2);
        for (const auto& name : names) {
            INFO(name);
            REQUIRE(name.rfind("step-1-node-", 0) == 0);
            auto object = s3.get("sky-checkpoints", "run-1/" + name);
            REQUIRE(object.has_value());
            CHECK(*object == "weights after " + std::to_string(kDataset.size()) + " bytes");
        }
        // A write to the read-only volume fails with EROFS, and nothing reaches its bucket.
        auto errs =
            sky::compute<write_file>(std::string("/root/data/new.csv"), std::string("x")) | pool;
        for (int e : errs) CHECK(e == EROFS);
        CHECK_FALSE(s3.get("sky-datasets", "datasets/new.csv").has_value());

        // While the pool runs: one s3fs per volume and node, and no key on any command line; the
        // credentials file is gone once the volumes are mounted.
        CHECK(s3fs_processes(s3.endpoint()) == 4);
        for (const auto& c : command_lines()) {
            INFO(c);
            CHECK(c.find(S3Server::secret_access_key) == std::string::npos);
            CHECK(c.find(session_token) == std::string::npos);
        }
        // The minted keys and token reach s3fs through its environment (owner-readable only);
        // the pool's own keys are nowhere on the nodes.
        const auto envs = s3fs_environments(s3.endpoint());
        CHECK(envs.size() == 4);
        for (const auto& env : envs) {
            CHECK(env.find(std::string("AWS_SESSION_TOKEN=") + session_token + '\0') !=
                  std::string::npos);
            CHECK(env.find("AWS_ACCESS_KEY_ID=S3RVER") != std::string::npos);
            CHECK(env.find(sts_options.access_key_id) == std::string::npos);
            CHECK(env.find(sts_options.secret_access_key) == std::string::npos);
        }
        // One STS request per node, scoped to the two volumes, for the pool's timeout.
        const auto minted = sts.federation_requests();
        CHECK(minted.size() == 2);
        for (const auto& r : minted) {
            CHECK(r.policy.find("arn:aws:s3:::sky-datasets/datasets/*") != std::string::npos);
            CHECK(r.policy.find("arn:aws:s3:::sky-checkpoints/run-1/*") != std::string::npos);
            CHECK(r.duration_seconds == 3600 + 600);
        }
        for (int i = 0; i < 2; ++i) {
            CHECK(host_mounts(hosts, i) == 2);
            CHECK(host_credential_files(hosts, i) == 0);
        }
    }
    // After the pool: no mount, no s3fs, no credentials file, no worker.
    for (int i = 0; i < 2; ++i) {
        CHECK(host_mounts(hosts, i) == 0);
        CHECK(host_credential_files(hosts, i) == 0);
    }
    CHECK(s3fs_processes(s3.endpoint()) == 0);
    CHECK(sky::test::remote_workers() == 0);
    ::unsetenv("AWS_ENDPOINT_URL_STS");
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST_CASE("volumes: a bucket that does not exist fails the pool in phase volumes naming it",
          "[volumes]") {
    if (skip_without_volumes()) return;
    TestHosts hosts(2);
    S3Server s3(bridge_address(hosts), {"sky-datasets"});
    use_s3rver_credentials();
    auto spec = spec_for(hosts, 2);
    // The first volume mounts; the second cannot: the first must be unmounted again.
    spec.volumes = {
        s3rver_volume(sky::S3Volume{
            .mount_path = "/root/data", .bucket = "sky-datasets", .endpoint = s3.endpoint()}),
        s3rver_volume(sky::S3Volume{.mount_path = "/root/missing",
                                    .bucket = "sky-no-such-bucket",
                                    .read_only = false,
                                    .endpoint = s3.endpoint()})};
    try {
        sky::ComputePool pool{spec};
        FAIL("the pool started without its volume");
    } catch (const sky::BootstrapError& e) {
        const std::string what = e.what();
        INFO(what);
        for (auto& l : e.output()) UNSCOPED_INFO(l);
        CHECK(e.phase() == "volumes");
        CHECK(what.find("sky-no-such-bucket") != std::string::npos);
        CHECK(what.find("/root/missing") != std::string::npos);
        CHECK(what.find(S3Server::secret_access_key) == std::string::npos);
        for (auto& l : e.output()) CHECK(l.find(S3Server::secret_access_key) == std::string::npos);
    }
    for (int i = 0; i < 2; ++i) {
        CHECK(host_mounts(hosts, i) == 0);
        CHECK(host_credential_files(hosts, i) == 0);
    }
    CHECK(s3fs_processes(s3.endpoint()) == 0);
    CHECK(sky::test::remote_workers() == 0);
}

TEST_CASE("volumes: an endpoint that refuses connections fails the pool in phase volumes",
          "[volumes]") {
    if (skip_without_volumes()) return;
    TestHosts hosts(1);
    use_s3rver_credentials();
    // Nothing listens on port 9 of the bridge address.
    const std::string endpoint = "http://" + bridge_address(hosts) + ":9";
    auto spec = spec_for(hosts, 1);
    spec.volumes = {s3rver_volume(
        sky::S3Volume{.mount_path = "/root/data", .bucket = "sky-datasets", .endpoint = endpoint})};
    try {
        sky::ComputePool pool{spec};
        FAIL("the pool started without its volume");
    } catch (const sky::BootstrapError& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(e.phase() == "volumes");
        CHECK(what.find("sky-datasets") != std::string::npos);
        CHECK(what.find("unable to connect") != std::string::npos);
    }
    CHECK(host_mounts(hosts, 0) == 0);
    CHECK(host_credential_files(hosts, 0) == 0);
    CHECK(s3fs_processes(endpoint) == 0);
    CHECK(sky::test::remote_workers() == 0);
}

TEST_CASE("volumes: the node's watchdog unmounts the volumes when the client is killed",
          "[volumes]") {
    if (skip_without_volumes()) return;
    TestHosts hosts(1);
    S3Server s3(bridge_address(hosts), {"sky-datasets"});
    use_s3rver_credentials();
    const std::string spec_file = (hosts.dir() / "orphan-volume-client").string();
    {
        std::ofstream f(spec_file);
        f << hosts.client_key_path().string() << " " << hosts.known_hosts_file().string() << " "
          << hosts.port(0) << " " << s3.endpoint() << " " << hosts.address(0) << "\n";
    }
    char buf[4096];
    auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    REQUIRE(n > 0);
    std::string exe(buf, static_cast<std::size_t>(n));
    std::string flag = "--orphan-volume-client";
    std::string file = spec_file;
    char* argv[] = {exe.data(), flag.data(), file.data(), nullptr};
    pid_t client = 0;
    REQUIRE(::posix_spawn(&client, exe.c_str(), nullptr, nullptr, argv, environ) == 0);
    const bool ready = sky::test::wait_until([&] { return fs::exists(spec_file + ".ready"); },
                                             std::chrono::seconds(90));
    if (!ready) ::kill(client, SIGKILL);
    int st = 0;
    if (!ready) ::waitpid(client, &st, 0);
    REQUIRE(ready);
    CHECK(host_mounts(hosts, 0) == 1);
    ::kill(client, SIGKILL);
    ::waitpid(client, &st, 0);
    // The worker ends with the connection; the watchdog unmounts once the node has not heard
    // from the client for idle_timeout (3 s).
    CHECK(sky::test::wait_until([&] { return s3fs_processes(s3.endpoint()) == 0; },
                                std::chrono::seconds(30)));
    CHECK(host_mounts(hosts, 0) == 0);
    CHECK(host_credential_files(hosts, 0) == 0);
}

TEST_CASE("volumes: a mount path another user could move is refused, naming why",
          "[volumes][security]") {
    // Review r4 L2: a directory on the way that another (non-root) user owns lets them rename it
    // and put something else at the mount path before the unmount.
    if (skip_without_volumes()) return;
    TestHosts hosts(1);
    S3Server s3(bridge_address(hosts), {"sky-datasets"});
    use_s3rver_credentials();
    const fs::path shared = hosts.host_path(0, "/tmp/shared");
    fs::create_directories(shared);
    REQUIRE(::chown(shared.c_str(), 65534, 65534) == 0);  // nobody's
    auto spec = spec_for(hosts, 1);
    spec.volumes = {s3rver_volume(sky::S3Volume{.mount_path = "/tmp/shared/alice-data",
                                                .bucket = "sky-datasets",
                                                .endpoint = s3.endpoint()})};
    try {
        sky::ComputePool pool{spec};
        FAIL("the volume was mounted inside another user's directory");
    } catch (const sky::BootstrapError& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(e.phase() == "volumes");
        CHECK(what.find("/tmp/shared") != std::string::npos);
        CHECK(what.find("another user") != std::string::npos);
    }
    // Group-writable without the sticky bit: refused too.
    REQUIRE(::chown(shared.c_str(), 0, 0) == 0);
    fs::permissions(shared, fs::perms::owner_all | fs::perms::group_all);
    try {
        sky::ComputePool pool{spec};
        FAIL("the volume was mounted inside a group-writable directory");
    } catch (const sky::BootstrapError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find("writable by other users") != std::string::npos);
    }
    CHECK(host_mounts(hosts, 0) == 0);
    CHECK(s3fs_processes(s3.endpoint()) == 0);
}

TEST_CASE("volumes: teardown unmounts only its own s3fs mount, never another mount at the path",
          "[volumes][security]") {
    // Review r4 L2: the unmount re-resolved the path and ran `umount` (then `umount -l`) on
    // whatever was there. Here the pool's mount goes away during the pool and someone else's
    // file system is mounted at the same path: teardown must leave it alone.
    if (skip_without_volumes()) return;
    TestHosts hosts(1);
    S3Server s3(bridge_address(hosts), {"sky-datasets"});
    use_s3rver_credentials();
    auto spec = spec_for(hosts, 1);
    spec.volumes = {s3rver_volume(sky::S3Volume{
        .mount_path = "/root/data", .bucket = "sky-datasets", .endpoint = s3.endpoint()})};
    {
        sky::ComputePool pool{spec};
        CHECK(host_mounts(hosts, 0) == 1);
        auto r = sky::test::run_command(hosts.ssh_command(
            0,
            "umount -l /root/data && mount -t tmpfs sky-someone-else /root/data && "
            "grep -c ' /root/data tmpfs ' /proc/self/mounts"));
        INFO(r.output);
        REQUIRE(r.status == 0);
        CHECK(sky::test::wait_until([&] { return s3fs_processes(s3.endpoint()) == 0; },
                                    std::chrono::seconds(10)));
    }
    auto after = sky::test::run_command(
        hosts.ssh_command(0, "grep -c ' /root/data tmpfs ' /proc/self/mounts; umount /root/data"));
    INFO(after.output);
    CHECK(after.output.rfind("1", 0) == 0);  // still mounted after the pool's teardown
    CHECK(host_credential_files(hosts, 0) == 0);
}

TEST_CASE("volumes: examples/volumes runs on test hosts against the test's S3 server",
          "[volumes]") {
#ifndef SKY_EXAMPLE_VOLUMES
    WARN("skipped: the examples are not built (SKY_BUILD_EXAMPLES=OFF)");
#else
    if (skip_without_volumes()) return;
    TestHosts hosts(2);
    S3Server s3(bridge_address(hosts), {"sky-datasets", "sky-checkpoints"});
    s3.put("sky-datasets", "datasets/train.csv", kDataset);
    use_s3rver_credentials();
    const std::string host_list = hosts.address(0) + "," + hosts.address(1);
    auto r = sky::test::run_command({SKY_EXAMPLE_VOLUMES,
                                     "--provider",
                                     "ssh",
                                     "--hosts",
                                     host_list,
                                     "--port",
                                     std::to_string(hosts.port(0)),
                                     "--identity",
                                     hosts.client_key_path().string(),
                                     "--known-hosts",
                                     hosts.known_hosts_file().string(),
                                     "--endpoint",
                                     s3.endpoint(),
                                     "--data-bucket",
                                     "sky-datasets",
                                     "--checkpoint-bucket",
                                     "sky-checkpoints",
                                     "--data-path",
                                     "/root/data",
                                     "--checkpoint-path",
                                     "/root/checkpoints"},
                                    std::chrono::seconds(240));
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("writing to the read-only dataset: Read-only file system") !=
          std::string::npos);
    // Each node's checkpoint is in the bucket; together they saw the dataset's 3 rows once.
    double rows = 0;
    for (int node = 0; node < 2; ++node) {
        auto object = s3.get("sky-checkpoints", "run-1/node-" + std::to_string(node) + ".ckpt");
        REQUIRE(object.has_value());
        INFO(*object);
        REQUIRE(object->rfind("rows ", 0) == 0);
        rows += std::stod(object->substr(5));
    }
    CHECK(rows == 3);
    for (int i = 0; i < 2; ++i) CHECK(host_mounts(hosts, i) == 0);
    CHECK(s3fs_processes(s3.endpoint()) == 0);
#endif
}

TEST_CASE("volumes: Local and Simulated pools with volumes are refused before anything starts",
          "[volumes]") {
    const std::vector<sky::Volume> v = {
        sky::S3Volume{.mount_path = "/data", .bucket = "sky-datasets", .prefix = "datasets/"}};
    for (sky::Provider p : {sky::Provider(sky::Local{}), sky::Provider(sky::Simulated{})}) {
        std::vector<std::string> events;
        try {
            sky::ComputePool pool{
                {.provider = p,
                 .volumes = v,
                 .display = sky::Display::quiet,
                 .on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
                     events.push_back(std::to_string(e.index()));
                     return std::nullopt;
                 }}};
            FAIL("the pool started without its volume");
        } catch (const sky::ConfigError& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(what.find("s3://sky-datasets/datasets") != std::string::npos);
            CHECK(what.find("does not mount volumes") != std::string::npos);
        }
        CHECK(events.empty());  // no machine, no worker
    }
}
