// A program built with -g0: a call that writes through a null pointer kills its worker, and the
// NodeLostError still names the function (the symbol table has it) with no file and line 0.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>

#include "support/crash_expect.hpp"

namespace nodebug {

int* volatile null_target = nullptr;

// Not inlined into sky's call wrapper: the frame the test looks for is the function's own.
__attribute__((noinline)) int write_through_null(int x) {
    std::cout << "no debug information here" << std::endl;
    *null_target = x;
    return x;
}

}  // namespace nodebug

TEST_CASE("without debug information a crash names the function, with no file and line 0",
          "[forensics]") {
    sky::ComputePool pool{{.nodes = 1, .display = sky::Display::quiet}};
    try {
        sky::compute<nodebug::write_through_null>(1) >> pool;
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        sky::test::expect_null_write(e, "nodebug::write_through_null", "", 0,
                                     "no debug information here");
    }
}

int main(int argc, char** argv) {
    sky::init(argc, argv);
    return Catch::Session().run(argc, argv);
}
