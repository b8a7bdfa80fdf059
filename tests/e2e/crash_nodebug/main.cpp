// A program built with -g0: a call that writes through a null pointer kills its worker, and the
// NodeLostError still names the function (the symbol table has it) with no file and line 0.
#define CATCH_CONFIG_RUNNER
#include <signal.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>

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
        INFO(e.what());
        CHECK(e.signal() == SIGSEGV);
        REQUIRE_FALSE(e.stack().empty());
        const sky::StackFrame& top = e.stack().front();
        CHECK(top.function.find("nodebug::write_through_null") != std::string::npos);
        CHECK(top.file.empty());
        CHECK(top.line == 0);
        CHECK(top.address != 0);
        CHECK(e.remote_log() == std::vector<std::string>{"no debug information here"});
        CHECK(std::string(e.what()).find("#0 nodebug::write_through_null(int)") !=
              std::string::npos);
    }
}

int main(int argc, char** argv) {
    sky::init(argc, argv);
    return Catch::Session().run(argc, argv);
}
