#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "sky/sky.hpp"

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: on a test host this binary is the worker
    return Catch::Session().run(argc, argv);
}
