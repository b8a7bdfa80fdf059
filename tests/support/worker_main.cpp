// The main of a test program whose binary is shipped to test hosts and runs there as the worker:
// sky::init first (on a host it serves calls and never returns), then Catch2.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "sky/sky.hpp"

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: on a test host this binary is the worker
    return Catch::Session().run(argc, argv);
}
