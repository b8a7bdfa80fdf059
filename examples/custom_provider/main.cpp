// A pool on your own machines: a 2-node pool on a lab's bare-metal fleet through FleetCloud, a
// user-defined sky provider (fleet_cloud.hpp), then a broadcast and a gather on it.
//
//   FLEET_URL=https://fleet.lab.example FLEET_TOKEN=... custom_provider
//   FLEET_URL=... FLEET_TOKEN=... custom_provider --release POOL_ID
//
// The second form releases what a pool left claimed (a client killed with SIGKILL cannot release
// its claims, and `sky gc` cannot reach a provider that a program defined): it needs nothing but
// the pool's id, which the first form prints first.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <numeric>
#include <sky/sky.hpp>
#include <string>
#include <vector>

#include "fleet_cloud.hpp"

namespace demo {

// Runs on every node (a broadcast): where am I?
std::string where() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    auto info = sky::instance_info();
    return "node " + std::to_string(info.node) + " of " + std::to_string(info.total_nodes) +
           " on " + host;
}

long square(long x) { return x * x; }

}  // namespace demo

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns

    const char* url = std::getenv("FLEET_URL");
    const char* token = std::getenv("FLEET_TOKEN");
    if (!url || !*url || !token || !*token) {
        std::cerr << "custom_provider: set FLEET_URL and FLEET_TOKEN\n";
        return 2;
    }
    try {
        fleet::FleetCloud cloud{url, token};

        if (argc == 3 && std::string(argv[1]) == "--release") {
            std::vector<std::string> ids;
            for (const auto& i : cloud.list(argv[2])) ids.push_back(i.id);
            cloud.terminate(ids);
            std::cout << "released " << ids.size() << " machine(s) of pool " << argv[2] << "\n";
            return 0;
        }
        if (argc != 1) {
            std::cerr << "usage: custom_provider [--release POOL_ID]\n";
            return 2;
        }

        // The fleet has no spot market (its offers say so): the pool asks for none, as the
        // default strategy (Spot::Always) would rule every offer out.
        sky::ComputePool pool{
            {.provider = cloud, .nodes = 2, .cpu = 4, .spot = sky::Spot::Never{}}};
        std::cout << "pool " << pool.id() << std::endl;  // first: what --release needs
        for (const auto& i : pool.instances())
            std::cout << "machine " << i.id << " (" << i.instance_type << ", "
                      << i.public_ip.value_or("?") << ") is node " << i.node << "\n";

        std::vector<std::string> hello = sky::compute<demo::where>() | pool;
        for (const auto& h : hello) std::cout << "broadcast: " << h << "\n";

        std::vector<sky::PendingCompute<long>> squares;
        for (long x = 1; x <= 100; ++x) squares.push_back(sky::compute<demo::square>(x));
        std::vector<long> got = sky::gather(std::move(squares)) >> pool;
        std::cout << "gather: sum of squares 1..100 = "
                  << std::accumulate(got.begin(), got.end(), 0L) << "\n";
        return 0;
    } catch (const sky::ProvisionError& e) {
        // No capacity anywhere: every offer the pool tried is in attempts().
        std::cerr << "custom_provider: sky::ProvisionError (" << e.attempts().size()
                  << " attempts): " << e.what() << "\n";
    } catch (const sky::Error& e) {
        std::cerr << "custom_provider: " << e.what() << "\n";
    } catch (const std::exception& e) {
        std::cerr << "custom_provider: unexpected error: " << e.what() << "\n";
    }
    return 1;
}
