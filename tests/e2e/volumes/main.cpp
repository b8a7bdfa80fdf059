// The volume tests' main: the binary is shipped to the test hosts and runs there as the worker,
// so sky::init comes first.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "sky/sky.hpp"

int main(int argc, char** argv) {
    sky::init(argc, argv);
    return Catch::Session().run(argc, argv);
}
