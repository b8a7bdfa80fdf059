// The job as a program: on this machine by default, on AWS with --aws, on a simulated cloud with
// --simulated (whose faults SKY_SIMULATED sets without recompiling, e.g.
// SKY_SIMULATED='{"faults":[{"kind":"preempt","node":1,"after_ms":500}]}' ./ci_testing
// --simulated).
#include <cstring>
#include <iostream>

#include "job.hpp"

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    sky::PoolSpec spec{.provider = sky::Local{}, .nodes = 2};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--aws") == 0) spec.provider = sky::AWS{};
        if (std::strcmp(argv[i], "--simulated") == 0) spec.provider = sky::Simulated{};
    }
    return job::main_with(std::move(spec), 200, std::cout);
}
