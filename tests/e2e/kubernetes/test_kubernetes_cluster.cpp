// A real Kubernetes cluster (tests/hosts/kubernetes): it comes up, runs a pod, and its teardown
// leaves nothing; and sky's own WebSocket client of the API server's exec and portforward works
// against it as a user with only a namespaced Role.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>

#include "hosts/kubernetes/kubernetes_cluster.hpp"
#include "io/blocking_stream.hpp"
#include "providers/kubernetes/channel.hpp"
#include "providers/kubernetes/kubeconfig.hpp"
#include "providers/kubernetes/streaming.hpp"
#include "util/digest.hpp"

namespace fs = std::filesystem;
using namespace sky::detail::kubernetes;
using sky::test::KubernetesCluster;

namespace {

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Processes whose command line names `needle` (the cluster's directory).
int processes_naming(const std::string& needle) {
    int n = 0;
    DIR* d = ::opendir("/proc");
    if (!d) return -1;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        std::string cmd = read_text(fs::path("/proc") / e->d_name / "cmdline");
        for (auto& c : cmd)
            if (c == '\0') c = ' ';
        if (cmd.find(needle) != std::string::npos) ++n;
    }
    ::closedir(d);
    return n;
}

std::string random_bytes(std::size_t n) {
    std::mt19937_64 rng(42);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

// The host settings a kubelet or a CNI plugin would change if let: they must not move.
std::string host_sysctls() {
    std::string out;
    for (const char* k :
         {"net/ipv4/ip_forward", "vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"})
        out += std::string(k) + "=" + read_text(fs::path("/proc/sys") / k);
    return out;
}

}  // namespace

TEST_CASE(
    "kubernetes cluster: up with a Ready node, a pod Running, and down leaves no process, "
    "mount, bridge, cgroup or file, and no host sysctl changed",
    "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    const std::string sysctls = host_sysctls();
    fs::path dir;
    std::string bridge, cgroup;
    {
        KubernetesCluster cluster(1);
        dir = cluster.dir();
        bridge = cluster.env("SKY_KUBE_BRIDGE");
        cgroup = cluster.env("SKY_KUBE_CGROUP");
        REQUIRE(!bridge.empty());
        REQUIRE(!cgroup.empty());
        cluster.run_pod("hello", R"(["/bin/sleep", "600"])");
        CHECK(cluster.pod_phase("hello") == "Running");
        // The nodes' mounts stay in their own namespaces: none is in this one.
        CHECK(read_text("/proc/self/mountinfo").find(dir.string()) == std::string::npos);
        CHECK(processes_naming(dir.string()) > 0);
        CHECK(host_sysctls() == sysctls);
    }
    CHECK(host_sysctls() == sysctls);
    CHECK_FALSE(fs::exists(dir));
    CHECK(processes_naming(dir.string()) == 0);
    CHECK(sky::test::run_command({"ip", "link", "show", bridge}).status != 0);
    for (const char* h : {"cpu", "memory", "pids", "freezer", "devices", "blkio", "cpuset"})
        CHECK_FALSE(fs::exists(fs::path("/sys/fs/cgroup") / h / cgroup));
}

TEST_CASE(
    "kubernetes streaming: exec's output and exit code, a few MB through exec's stdin "
    "intact, a port-forward that echoes, a refusal quoting RBAC, as a namespaced user",
    "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster cluster(1);
    cluster.run_pod("echo",
                    R"(["/usr/local/bin/busybox", "nc", "-ll", "-p", "7000", "-e", "/bin/cat"])");
    KubeconfigRequest request;
    request.kubeconfig = cluster.user_kubeconfig();
    CredentialSource creds(load_kubeconfig(request));
    REQUIRE(creds.target().ns == "sky-test");

    ExecRequest hi;
    hi.ns = "sky-test";
    hi.pod = "echo";
    hi.argv = {"sh", "-c", "echo hi; echo oops >&2; exit 3"};
    const ExecResult r = exec(creds, hi);
    CHECK(r.exited);
    CHECK(r.exit_code == 3);
    CHECK(r.out == "hi\n");
    CHECK(r.err == "oops\n");
    // Offered v5 then v4; a 1.20 cluster (containerd 1.6) speaks v4.
    CHECK((r.protocol == kChannelV4 || r.protocol == kChannelV5));
    hi.argv = {"true"};
    CHECK(exec(creds, hi).exit_code == 0);
    hi.argv = {"/no/such/program"};
    const ExecResult missing = exec(creds, hi);
    CHECK_FALSE(missing.exited);
    CHECK_THAT(missing.failure, Catch::Contains("no/such/program"));

    // An upload, length-delimited so that v4 (no stdin close) works, then its hash there.
    const std::string data = random_bytes(3u << 20);
    ExecRequest up;
    up.ns = "sky-test";
    up.pod = "echo";
    up.argv = {"sh", "-c", "head -c \"$0\" | sha256sum", std::to_string(data.size())};
    up.stdin_data = data;
    up.timeout = std::chrono::seconds(120);
    const ExecResult hashed = exec(creds, up);
    CHECK(hashed.exited);
    CHECK(hashed.exit_code == 0);
    CHECK(hashed.err.empty());
    CHECK(hashed.out.substr(0, 64) == sky::detail::sha256_hex(data));

    // A port-forward to the pod's echo server: bytes out come back.
    {
        sky::detail::io::BlockingStream stream(open_port_forward(creds, "sky-test", "echo", 7000));
        const std::string payload = random_bytes(200000);
        const std::span<const std::byte> piece(reinterpret_cast<const std::byte*>(payload.data()),
                                               payload.size());
        const std::span<const std::byte> pieces[] = {piece};
        stream.write_all(pieces);
        std::string back;
        std::vector<std::byte> buf(65536);
        while (back.size() < payload.size()) {
            REQUIRE(stream.wait_readable(std::chrono::seconds(20)));
            const std::size_t n = stream.read_some(buf);
            REQUIRE(n > 0);
            back.append(reinterpret_cast<const char*>(buf.data()), n);
        }
        CHECK(back == payload);
    }

    // RBAC: the user's Role is in sky-test only; the server's refusal is quoted.
    ExecRequest elsewhere = hi;
    elsewhere.ns = "default";
    elsewhere.argv = {"true"};
    try {
        (void)exec(creds, elsewhere);
        FAIL("exec outside the user's namespace must be refused");
    } catch (const StreamRefused& e) {
        CHECK(e.status() == 403);
        CHECK_THAT(e.message(), Catch::Contains("pods/exec") && Catch::Contains("sky-user"));
    }
}
