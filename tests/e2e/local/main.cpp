// The test program is its own worker: sky::init first, then Catch.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#include "e2e/local/functions.hpp"
#include "sky/sky.hpp"

namespace e2e {
// A worker that misbehaves as `mode` says (test_auth.cpp), started by a pool whose env sets
// SKY_E2E_FAKE_WORKER.
int fake_worker(const char* mode);
}  // namespace e2e

int main(int argc, char** argv) {
    if (const char* fake = std::getenv("SKY_E2E_FAKE_WORKER");
        fake && argc == 2 && std::strcmp(argv[1], "--sky-worker") == 0)
        return e2e::fake_worker(fake);
    sky::init(argc, argv);
    // A client that is killed while its pool runs (see "workers die with their client").
    if (argc == 3 && std::strcmp(argv[1], "--orphan-client") == 0)
        return e2e::orphan_client(argv[2]);
    return Catch::Session().run(argc, argv);
}
