// The test program is its own worker: sky::init first, then Catch.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <sky/sky.hpp>

int main(int argc, char** argv) {
    sky::init(argc, argv);
    return Catch::Session().run(argc, argv);
}
