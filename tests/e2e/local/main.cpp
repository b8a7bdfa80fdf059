// The test program is its own worker: sky::init first, then Catch.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstring>

#include "e2e/local/functions.hpp"
#include "sky/sky.hpp"

int main(int argc, char** argv) {
    sky::init(argc, argv);
    // A client that is killed while its pool runs (see "workers die with their client").
    if (argc == 3 && std::strcmp(argv[1], "--orphan-client") == 0)
        return e2e::orphan_client(argv[2]);
    return Catch::Session().run(argc, argv);
}
