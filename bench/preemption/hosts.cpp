// bench/preemption's row on SSH test hosts: sky::AWS over the project's fake EC2, whose instances
// are test hosts (network namespaces with a real sshd), each host with a fake instance metadata
// service (IMDSv2) on its own 127.0.0.1. A notice takes the whole real way: the metadata
// announces a spot interruption -> the node's launcher reads it with spot_probe.sh (every 3 s)
// -> the notice file -> the worker's notice frame -> the pool's desk -> a preempt frame to every
// node -> sky::preemption() on every rank.
#include "preemption/hosts.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fakes/ec2/fake_ec2.hpp"
#include "fakes/ec2/fake_imds.hpp"
#include "hosts/test_hosts.hpp"
#include "providers/aws/scripts.hpp"
#include "util/shell.hpp"

namespace bench {

namespace {

using namespace std::chrono_literals;

const char* kKey = "AKIDSKYBENCHPREEMPT1";
const char* kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYBENCHSECRET";

double epoch_s(std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

HostsResult hosts_row(int n, const std::string& testdata) {
    HostsResult out;
    std::string why;
    if (!sky::test::TestHosts::available(&why)) {
        out.skipped = why;
        return out;
    }
    ::setenv("AWS_ACCESS_KEY_ID", kKey, 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", kSecret, 1);
    ::unsetenv("AWS_SESSION_TOKEN");
    ::setenv("SKY_AWS_SSH_USER", "root", 1);
    constexpr int kNodes = 3;
    sky::test::TestHosts hosts(kNodes);
    // Each host's metadata endpoint, in a file of the host's own /tmp (also the probe's marker).
    const std::string file = "/tmp/sky-bench-imds-" + std::to_string(::getpid());
    std::vector<std::unique_ptr<sky::test::FakeImds>> imds;
    for (int h = 0; h < kNodes; ++h) {
        imds.push_back(std::make_unique<sky::test::FakeImds>(hosts, h));
        std::ofstream(hosts.host_path(h, file)) << imds.back()->endpoint() << "\n";
    }
    const std::string probe = "bash -c " +
                              sky::detail::shell_quote(sky::detail::scripts::spot_probe_sh()) +
                              " sky-spot-probe \"$(cat " + file + ")\" " + file;
    ::setenv("SKY_AWS_PREEMPTION_PROBE", probe.c_str(), 1);
    sky::test::FakeEc2Options o;
    o.instance_types_path = testdata + "/ec2-instance-types/accelerated-instance-types.json";
    o.model_path = testdata + "/ec2-model/service-2.json";
    o.access_key_id = kKey;
    o.secret_access_key = kSecret;
    o.hosts = &hosts;
    sky::test::FakeEc2 fake(o);
    // A node is replaced at most 3 times in a pool's life: each pool warns each node once.
    for (int done = 0; done < n;) {
        const int here = std::min(kNodes, n - done);
        std::mutex m;
        std::vector<double> heard;  // when the pool heard of each notice (system clock, s)
        int preempted = 0, replaced = 0;
        sky::ComputePool pool{
            {.provider = sky::AWS{.region = "us-east-1", .endpoint = fake.endpoint()},
             .nodes = kNodes,
             .accelerator = "A100",
             .display = sky::Display::quiet}};
        pool.on<sky::PreemptionNotice>([&](const sky::PreemptionNotice&) {
            std::lock_guard lk(m);
            heard.push_back(epoch_s(std::chrono::system_clock::now()));
        });
        pool.on<sky::InstancePreempted>([&](const sky::InstancePreempted&) {
            std::lock_guard lk(m);
            ++preempted;
        });
        pool.on<sky::InstanceReplaced>([&](const sky::InstanceReplaced&) {
            std::lock_guard lk(m);
            ++replaced;
        });
        for (int k = 0; k < here; ++k, ++done) {
            std::string victim;
            for (const auto& i : pool.instances())
                if (i.node == k) victim = i.id;
            const int h = fake.host_of(victim);
            // The baseline first, on the same pool: a broadcast no-op round trip.
            const auto t0 = std::chrono::steady_clock::now();
            (void)(sky::compute<bench::noop>() | pool);
            out.call_ms.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count());
            if (h < 0) throw std::runtime_error("bench: no host for node " + std::to_string(k));
            auto ranks = std::async(std::launch::async, [&] {
                return std::vector<double>(sky::compute<bench::first_sight>(20000) | pool);
            });
            std::this_thread::sleep_for(500ms);  // the calls run on every node
            const auto announced = std::chrono::system_clock::now();
            imds[static_cast<std::size_t>(h)]->announce_interruption("terminate", announced + 6s);
            const std::vector<double> seen = ranks.get();
            double last = 0;
            for (double x : seen) last = (x < 0 || last < 0) ? -1 : std::max(last, x);
            {
                std::lock_guard lk(m);
                if (last < 0 || static_cast<int>(heard.size()) != k + 1) {
                    ++out.missed;
                } else {
                    out.notice_ms.push_back((last - heard.back()) * 1000.0);
                    out.probe_ms.push_back((heard.back() - epoch_s(announced)) * 1000.0);
                }
            }
            // The machine goes at the deadline; its host serves the replacement, a fresh
            // instance whose metadata announces nothing.
            for (int i = 0; i < 600; ++i) {
                {
                    std::lock_guard lk(m);
                    if (preempted > k) break;
                }
                std::this_thread::sleep_for(50ms);
            }
            imds[static_cast<std::size_t>(h)]->clear();
            for (int i = 0; i < 2400; ++i) {
                {
                    std::lock_guard lk(m);
                    if (replaced > k) break;
                }
                std::this_thread::sleep_for(50ms);
            }
        }
    }
    ::unsetenv("SKY_AWS_PREEMPTION_PROBE");
    std::error_code ec;
    for (int h = 0; h < kNodes; ++h) std::filesystem::remove(hosts.host_path(h, file), ec);
    return out;
}

}  // namespace bench
