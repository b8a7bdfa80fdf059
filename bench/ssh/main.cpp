// bench/ssh: sky::SSH on test hosts (network namespaces with a real sshd; needs root).
//
//   bootstrap    wall time of a pool on 1 and on 8 hosts, cold (program uploaded) and warm
//   round trip   `>>` of a no-op through sky's libssh2 tunnel vs the same worker protocol through
//                OpenSSH's own `ssh -L` forwarding, in the same run
//   payload      a 256 MiB std::vector<float> echo, the same two ways
//
// Usage: ssh [--quick]
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hosts/test_hosts.hpp"
#include "runtime/auth.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"

extern char** environ;

namespace bench {
void noop() {}
std::vector<float> echo(std::vector<float> v) { return v; }
}  // namespace bench

namespace {

using Clock = std::chrono::steady_clock;
using sky::test::TestHosts;
namespace d = sky::detail;

double secs(Clock::duration x) { return std::chrono::duration<double>(x).count(); }

sky::PoolSpec spec_for(const TestHosts& h, int nodes) {
    sky::SSH ssh;
    for (int i = 0; i < nodes; ++i) ssh.hosts.push_back(h.address(i));
    ssh.port = h.port(0);
    ssh.identity_file = h.client_key_path().string();
    ssh.known_hosts = h.known_hosts_file().string();
    return {.provider = ssh, .nodes = nodes, .display = sky::Display::quiet};
}

double pool_start(const TestHosts& h, int nodes) {
    auto t0 = Clock::now();
    sky::ComputePool pool{spec_for(h, nodes)};
    double s = secs(Clock::now() - t0);
    sky::compute<bench::noop>() | pool;
    return s;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// A worker of this program inside host 0's namespace, reached through `ssh -L`, spoken to with
// the wire protocol directly: the same worker and protocol as a pool, OpenSSH's tunnel instead
// of sky's.
struct OpenSshPath {
    pid_t worker = -1, ssh = -1;
    std::unique_ptr<d::FdTransport> t;
    std::unique_ptr<d::FrameReader> r;
    std::uint64_t next_id = 1;

    OpenSshPath(const TestHosts& h, const std::string& dir) {
        std::string exe = std::filesystem::read_symlink("/proc/self/exe");
        std::string port_file = dir + "/bench-worker-port";
        std::filesystem::remove(port_file);
        std::vector<std::string> a = {"ip",
                                      "netns",
                                      "exec",
                                      h.netns(0),
                                      "env",
                                      "SKY_WORKER_LISTEN=127.0.0.1:0",
                                      "SKY_WORKER_TOKEN=bench",
                                      "SKY_WORKER_PORT_FILE=" + port_file,
                                      exe,
                                      "--sky-worker"};
        worker = spawn(a);
        int wport = 0;
        for (int i = 0; i < 500 && !wport; ++i) {
            std::ifstream f(port_file);
            if (!(f >> wport)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (!wport) throw std::runtime_error("the benchmark worker did not start");
        int lport = 20000 + (::getpid() % 20000);
        std::vector<std::string> s = {
            "ssh",
            "-N",
            "-o",
            "BatchMode=yes",
            "-o",
            "UserKnownHostsFile=" + h.known_hosts_file().string(),
            "-o",
            "StrictHostKeyChecking=yes",
            "-i",
            h.client_key_path().string(),
            "-p",
            std::to_string(h.port(0)),
            "-L",
            "127.0.0.1:" + std::to_string(lport) + ":127.0.0.1:" + std::to_string(wport),
            "root@" + h.address(0)};
        ssh = spawn(s);
        int fd = -1;
        for (int i = 0; i < 300 && fd < 0; ++i) {
            try {
                fd = d::connect_tcp("127.0.0.1", lport, std::chrono::seconds(1));
            } catch (...) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        if (fd < 0) throw std::runtime_error("ssh -L did not come up");
        t = std::make_unique<d::FdTransport>(fd, "ssh -L");
        // The same handshake the pool does: challenge-response, then the hellos.
        r = std::make_unique<d::FrameReader>(*t, d::auth_max_frame);
        d::client_authenticate(*t, *r, "bench", std::chrono::seconds(30));
        r = std::make_unique<d::FrameReader>(std::move(*r), 1u << 30);
        d::Frame f;
        if (!r->next(f)) throw std::runtime_error("no hello through ssh -L");
        d::ClientHello ch;
        d::Buffer p, frame;
        d::save_to(p, ch);
        d::append_frame(frame, d::MsgType::hello, 0, p.span());
        std::span<const std::byte> one[] = {frame.span()};
        t->write_all(one);
        // The worker is ready once it knows its worker processes: a ready frame.
        if (!r->next(f) || f.header.type != d::MsgType::ready)
            throw std::runtime_error("no ready frame through ssh -L");
    }
    ~OpenSshPath() {
        if (t) t->shutdown();
        for (pid_t p : {ssh, worker})
            if (p > 0) {
                ::kill(p, SIGTERM);
                int st;
                ::waitpid(p, &st, 0);
            }
    }
    static pid_t spawn(std::vector<std::string>& a) {
        std::vector<char*> argv;
        for (auto& s : a) argv.push_back(s.data());
        argv.push_back(nullptr);
        pid_t pid = 0;
        if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
            throw std::runtime_error("cannot start " + a[0]);
        return pid;
    }
    // One call, as the pool would send it; returns the result frame's payload size.
    template <class R>
    std::size_t call(const sky::PendingCompute<R>& p) {
        d::Buffer frame;
        auto& c = p.desc();
        std::size_t len = d::call_header_size(c.function.size()) + c.args->size();
        frame.resize(d::frame_header_size);
        d::encode_header(frame.data(), d::MsgType::call, next_id++, len);
        d::append_call_header(frame, c.function, c.signature);
        std::span<const std::byte> parts[] = {frame.span(), c.args->span()};
        t->write_all(parts);
        d::Frame f;
        if (!r->next(f) || f.header.type != d::MsgType::result)
            throw std::runtime_error("no result");
        return f.payload.size();
    }
};

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    std::string why;
    if (!TestHosts::available(&why)) {
        std::printf("bench/ssh skipped: %s\n", why.c_str());
        return 0;
    }
    const int rt_iters = quick ? 300 : 3000;
    const std::size_t floats = (quick ? 32u : 256u) << 20 >> 2;
    // Each test host has a home of its own, so fresh hosts have an empty program cache.
    double cold1 = 0, warm1 = 0;
    {
        TestHosts one(1);
        cold1 = pool_start(one, 1);
        warm1 = pool_start(one, 1);
    }
    TestHosts hosts(8);
    double cold8 = pool_start(hosts, 8);
    double warm8 = pool_start(hosts, 8);

    std::vector<double> sky_rt, ossh_rt;
    double sky_echo = 0, ossh_echo = 0;
    std::vector<float> v(floats, 0.5f);
    {
        sky::ComputePool pool{spec_for(hosts, 1)};
        OpenSshPath ossh(hosts, hosts.dir().string());
        auto noop = sky::compute<bench::noop>();
        for (int round = 0; round < 10; ++round) {
            for (int i = 0; i < rt_iters / 10; ++i) {
                auto t0 = Clock::now();
                noop >> pool;
                sky_rt.push_back(secs(Clock::now() - t0) * 1e6);
            }
            for (int i = 0; i < rt_iters / 10; ++i) {
                auto t0 = Clock::now();
                ossh.call(noop);
                ossh_rt.push_back(secs(Clock::now() - t0) * 1e6);
            }
        }
        auto e = sky::compute<bench::echo>(v);
        for (int rep = 0; rep < 3; ++rep) {
            auto t0 = Clock::now();
            auto back = e >> pool;
            double s = secs(Clock::now() - t0);
            sky_echo = rep == 0 ? s : std::min(sky_echo, s);
            if (back.size() != v.size()) return 1;
            t0 = Clock::now();
            ossh.call(e);
            s = secs(Clock::now() - t0);
            ossh_echo = rep == 0 ? s : std::min(ossh_echo, s);
        }
    }
    double mb = static_cast<double>(floats * sizeof(float)) / (1 << 20);
    double sky_mbs = 2 * mb / sky_echo, ossh_mbs = 2 * mb / ossh_echo;
    std::printf("sky bench/ssh (test hosts: network namespaces with OpenSSH sshd)%s\n",
                quick ? " [quick]" : "");
    std::printf("%-40s %12s %12s %8s %10s\n", "measure", "sky", "baseline", "ratio", "target");
    std::printf("%-40s %11.2fs %12s %8s %10s\n", "pool start, 1 host, cold (upload)", cold1, "", "",
                "");
    std::printf("%-40s %11.2fs %11.2fs %7.2fx %10s\n", "pool start, 8 hosts, cold (upload)", cold8,
                cold1, cold8 / cold1, "<= 2x");
    std::printf("%-40s %11.2fs %12s %8s %10s\n", "pool start, 1 host, warm (cached)", warm1, "", "",
                "");
    std::printf("%-40s %11.2fs %11.2fs %7.2fx %10s\n", "pool start, 8 hosts, warm (cached)", warm8,
                warm1, warm8 / warm1, "<= 2x");
    std::printf("%-40s %10.1fus %10.1fus %7.2fx %10s\n", ">> no-op round trip, median (vs ssh -L)",
                median(sky_rt), median(ossh_rt), median(sky_rt) / median(ossh_rt), "<= 1.3x");
    std::printf("%-40s %8.0fMB/s %8.0fMB/s %7.2fx %10s\n",
                (std::to_string(static_cast<int>(mb)) + " MiB echo (vs ssh -L)").c_str(), sky_mbs,
                ossh_mbs, sky_mbs / ossh_mbs, ">= 0.7x");
    std::printf(
        "(baselines: 1 host for the 8-host starts; the same worker program and protocol through\n"
        " OpenSSH's `ssh -L` for the tunnel rows; MB/s counts bytes moved both ways)\n");
    return 0;
}
