// ctest driver: runs ddp_libtorch across 3 SSH test hosts (network namespaces with real sshd).
// Prints "skipped: ..." (ctest counts it as skipped) where test hosts cannot be made here.
#include <chrono>
#include <iostream>
#include <string>

#include "hosts/test_hosts.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: ddp_libtorch_ssh_test PATH-TO-ddp_libtorch\n";
        return 2;
    }
    std::string why;
    if (!sky::test::TestHosts::available(&why)) {
        std::cout << "skipped: " << why << "\n";
        return 0;
    }
    sky::test::TestHosts hosts(3);
    std::string list;
    for (int i = 0; i < hosts.size(); ++i) list += (i ? "," : "") + hosts.address(i);
    const auto start = std::chrono::steady_clock::now();
    auto r = sky::test::run_command(
        {argv[1], "--ssh", list, "--identity", hosts.client_key_path().string(), "--known-hosts",
         hosts.known_hosts_file().string(), "--port", std::to_string(hosts.port(0)), "--user",
         hosts.user()},
        std::chrono::minutes(4));
    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
            .count();
    std::cout << r.output << "(" << secs << " s, shipping the libtorch closure included)\n";
    if (r.timed_out) std::cout << "timed out\n";
    return r.status == 0 ? 0 : 1;
}
