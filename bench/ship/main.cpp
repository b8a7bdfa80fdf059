// bench/ship: starting pools with a program whose closure is big, through a slow uplink.
//
// The program is this one: it links libshipblob.so (SKY_BENCH_SHIP_MB of random bytes, found only
// next to it through RUNPATH $ORIGIN), and every node calls into it. Test hosts have private file
// systems and cannot see the build tree, so only what sky sends is there. Traffic from this
// machine to the hosts is shaped to 200 Mbit/s with `tc tbf` on the hosts' bridge (host-to-host
// traffic is not): one uplink shared by every node, as a laptop's or an office's.
//
//   rows   pool start on 1 host cold, 8 hosts cold, 8 hosts warm; each a fresh process, as a user
//          runs a program; bytes the client sent (the bridge's tx counter) and the client's CPU
//          time from process start to pool ready
//   base   OpenSSH copying the library once to one host through the same shaping, in the same run
//
// Usage: ship [--rate 200mbit]           (needs root: network namespaces, sshd, tc)
//        ship --pool HOSTS_FILE NODES    (the measured program, started by the above)
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sky/sky.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hosts/test_hosts.hpp"
#include "util/shell.hpp"

extern "C" std::uint64_t ship_blob_checksum();

namespace bench_ship {
std::uint64_t checksum() { return ship_blob_checksum(); }
}  // namespace bench_ship

namespace {

using Clock = std::chrono::steady_clock;
using sky::test::TestHosts;
namespace fs = std::filesystem;

double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The measured program: a pool on the hosts in the file, one call per node.
int run_pool(const char* file, int nodes) {
    auto t0 = Clock::now();
    std::ifstream f(file);
    sky::SSH ssh;
    std::string host;
    f >> ssh.identity_file >> ssh.known_hosts >> ssh.port;
    while (f >> host) ssh.hosts.push_back(host);
    sky::PoolSpec spec{.provider = ssh, .nodes = nodes, .display = sky::Display::quiet};
    if (std::getenv("SKY_BENCH_TRACE"))  // where the time goes: every event, timed
        spec.on_event = [t0](const sky::Event& e) -> std::optional<sky::Event> {
            std::fprintf(stderr, "%7.3f %s\n",
                         std::chrono::duration<double>(Clock::now() - t0).count(),
                         sky::describe(e).c_str());
            return std::nullopt;
        };
    sky::ComputePool pool{spec};
    double start = std::chrono::duration<double>(Clock::now() - t0).count();
    double cpu = cpu_seconds();
    auto sums = sky::compute<bench_ship::checksum>() | pool;
    bool ok = static_cast<int>(sums.size()) == nodes;
    for (auto s : sums) ok = ok && s == ship_blob_checksum();
    std::printf("%.3f %.3f %d\n", start, cpu, ok ? 1 : 0);
    return ok ? 0 : 1;
}

std::uint64_t tx_bytes(const std::string& dev) {
    std::ifstream f("/sys/class/net/" + dev + "/statistics/tx_bytes");
    std::uint64_t n = 0;
    f >> n;
    return n;
}

void shape(const TestHosts& h, const std::string& rate) {
    auto r = sky::test::run_command({"tc", "qdisc", "replace", "dev", h.bridge(), "root", "tbf",
                                     "rate", rate, "burst", "256kb", "latency", "100ms"});
    if (r.status != 0) throw std::runtime_error("tc failed: " + r.output);
}

struct Row {
    std::string what;
    double start = 0, cpu = 0;
    std::uint64_t bytes = 0;
    bool ok = false;
};

Row measure(const std::string& what, const TestHosts& h, int nodes, const fs::path& self) {
    auto file = h.dir() / "bench-hosts";
    {
        std::ofstream f(file);
        f << h.client_key_path().string() << "\n"
          << h.known_hosts_file().string() << "\n"
          << h.port(0) << "\n";
        for (int i = 0; i < nodes; ++i) f << h.address(i) << "\n";
    }
    auto before = tx_bytes(h.bridge());
    auto r = sky::test::run_command({self.string(), "--pool", file.string(), std::to_string(nodes)},
                                    std::chrono::seconds(600));
    Row row;
    row.what = what;
    row.bytes = tx_bytes(h.bridge()) - before;
    std::istringstream is(r.output.substr(r.output.find_last_of('\n', r.output.size() - 2) + 1));
    int ok = 0;
    if (r.status == 0 && (is >> row.start >> row.cpu >> ok)) row.ok = ok == 1;
    if (!row.ok || std::getenv("SKY_BENCH_TRACE")) std::cerr << what << ":\n" << r.output << "\n";
    return row;
}

Row openssh_copy(const TestHosts& h, const fs::path& lib) {
    auto before = tx_bytes(h.bridge());
    auto t0 = Clock::now();
    // The library on ssh's standard input: a shell does the redirection.
    std::string line;
    for (auto& a :
         h.ssh_command(0, "cat > /tmp/copy && sha256sum /tmp/copy >/dev/null && rm -f /tmp/copy"))
        line += sky::detail::shell_quote(a) + " ";
    auto r =
        sky::test::run_command({"sh", "-c", line + "< " + sky::detail::shell_quote(lib.string())},
                               std::chrono::seconds(600));
    Row row{"baseline: ssh cat of the library, 1 host", 0, 0, 0, r.status == 0};
    row.start = std::chrono::duration<double>(Clock::now() - t0).count();
    row.bytes = tx_bytes(h.bridge()) - before;
    if (!row.ok) std::cerr << "baseline failed: " << r.output << "\n";
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    if (argc == 4 && std::strcmp(argv[1], "--pool") == 0)
        return run_pool(argv[2], std::atoi(argv[3]));
    std::string rate = "200mbit";
    if (argc == 3 && std::strcmp(argv[1], "--rate") == 0) rate = argv[2];
    std::string why;
    if (!TestHosts::available(&why)) {
        std::cerr << "bench/ship needs test hosts: " << why << "\n";
        return 2;
    }
    const fs::path self = fs::read_symlink("/proc/self/exe");
    const fs::path lib = self.parent_path() / "libshipblob.so";
    std::uint64_t closure = 0;
    for (auto& e : fs::directory_iterator(self.parent_path()))
        if (e.path() == self || e.path() == lib) closure += e.file_size();

    std::vector<Row> rows;
    {
        TestHosts one(1);
        shape(one, rate);
        rows.push_back(openssh_copy(one, lib));
        rows.push_back(measure("1 host, cold", one, 1, self));
    }
    {
        TestHosts eight(8);
        shape(eight, rate);
        rows.push_back(measure("8 hosts, cold", eight, 8, self));
        rows.push_back(measure("8 hosts, warm", eight, 8, self));
    }
    std::printf("\nbench/ship: program + libshipblob.so = %.0f MB (incompressible), uplink %s\n\n",
                static_cast<double>(closure) / 1e6, rate.c_str());
    std::printf("%-44s %10s %12s %10s %4s\n", "", "start (s)", "sent (MB)", "cpu (s)", "ok");
    for (auto& r : rows)
        std::printf("%-44s %10.2f %12.1f %10.2f %4s\n", r.what.c_str(), r.start,
                    static_cast<double>(r.bytes) / 1e6, r.cpu, r.ok ? "yes" : "NO");
    const double one_cold = rows[1].start, eight_cold = rows[2].start, warm = rows[3].start;
    std::printf("\n8 hosts cold / 1 host cold: %.2fx (target <= 1.5x)\n", eight_cold / one_cold);
    std::printf("8 hosts warm: %.2f s (target <= 3 s)\n", warm);
    std::printf("1 host cold / OpenSSH copy: %.2fx\n", one_cold / rows[0].start);
    bool all = true;
    for (auto& r : rows) all = all && r.ok;
    return all ? 0 : 1;
}
