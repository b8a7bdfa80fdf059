// A program with a library of its own, found only next to it (RUNPATH $ORIGIN): started by the
// shipping tests as a separate process, once per pool, with the test hosts read from a file.
//   ship_program <hosts file> <nodes>      prints "value <node> <result>" per node and
//                                          "step <name> <bytes_done> <bytes_total>" per event
#include <fstream>
#include <iostream>
#include <mutex>

#include "sky/sky.hpp"

extern "C" int ship_value();
#ifdef SHIP_DRIVER_LIKE
extern "C" int driver_like_value();
#endif

namespace ship_test {
int value() {
#ifdef SHIP_DRIVER_LIKE
    return ship_value() + driver_like_value();
#else
    return ship_value();
#endif
}
int node() { return sky::instance_info().node; }
}  // namespace ship_test

int main(int argc, char** argv) {
    sky::init(argc, argv);
    if (argc != 3) {
        std::cerr << "usage: ship_program <hosts file> <nodes>\n";
        return 2;
    }
    std::ifstream f(argv[1]);
    sky::SSH ssh;
    std::string host;
    f >> ssh.identity_file >> ssh.known_hosts >> ssh.port;
    while (f >> host) ssh.hosts.push_back(host);
    std::mutex m;
    sky::PoolSpec spec{
        .provider = ssh, .nodes = std::atoi(argv[2]), .display = sky::Display::quiet};
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* p = std::get_if<sky::BootstrapProgress>(&e)) {
            std::lock_guard lk(m);
            std::cout << "step " << p->step << " " << p->bytes_done << " " << p->bytes_total << " "
                      << p->instance_id << std::endl;
        }
        return std::nullopt;
    };
    try {
        sky::ComputePool pool{spec};
        auto nodes = sky::compute<ship_test::node>() | pool;
        auto values = sky::compute<ship_test::value>() | pool;
        for (std::size_t i = 0; i < values.size(); ++i)
            std::cout << "value " << nodes[i] << " " << values[i] << std::endl;
    } catch (const sky::BootstrapError& e) {
        std::cout << "bootstrap-error " << e.phase() << ": " << e.what() << std::endl;
        return 3;
    }
    return 0;
}
