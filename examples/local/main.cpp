// Running a compute function here, now, without a pool (seeds 002, 003: `process.local(10)`), to
// test or debug it. `sky::compute<F>.local(args...)` calls F directly in this process: no
// serialization, no worker. The same function sent to a pool gives the same answer from a worker
// process (on this machine with Local, on another machine with any other provider).
//
//   example_local                                       # 1 worker process on this machine
//   example_local --provider ssh --hosts A --identity KEY --known-hosts FILE
#include <unistd.h>

#include <example_provider.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>

namespace calc {

int process(int x) { return x * 2; }

// The process that ran the call, to tell where it ran.
long pid() { return static_cast<long>(::getpid()); }

}  // namespace calc

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        // No pool needed: a plain call, in this process.
        int here = sky::compute<calc::process>.local(10);
        long here_pid = sky::compute<calc::pid>.local();
        std::cout << "process.local(10) = " << here << "\n";
        std::cout << "local call ran in this process: " << (here_pid == ::getpid() ? "yes" : "no")
                  << "\n";

        // The same function as a value you can name and pass around.
        constexpr auto process = sky::compute<calc::process>;

        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 1)}};
        int there = process(10) >> pool;
        long there_pid = sky::compute<calc::pid>() >> pool;
        std::cout << "process(10) >> pool = " << there << "\n";
        std::cout << "pool call ran in this process: " << (there_pid == ::getpid() ? "yes" : "no")
                  << "\n";
        std::cout << "same answer: " << (here == there ? "yes" : "no") << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
