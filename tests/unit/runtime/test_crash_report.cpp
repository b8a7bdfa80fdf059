// The client's reader of a worker's crash report: a hostile worker's report (the 1 MiB the
// client reads of it) gives no more frames, call ids and modules than the worker's own handler
// ever writes, so it is not amplified into every call the node loses.
#include <catch2/catch.hpp>
#include <string>

#include "runtime/crash_report.hpp"

using namespace sky::detail;

TEST_CASE("a crash report is read no further than the handler's own limits", "[crash]") {
    std::string text(crash_report_magic);
    text += "\nsignal 11 1 0\ncall 7\nrunning";
    for (int i = 0; i < 20000; ++i) text += " " + std::to_string(i);
    text += "\n";
    for (std::size_t i = 0; i < crash_report_max_modules + 100; ++i)
        text += "module " + std::to_string(i) + " lib - /lib/x.so\n";
    while (text.size() < (1u << 20)) text += "frame 0 1f\n";
    const auto r = parse_crash_report(text);
    REQUIRE(r);
    CHECK(r->signal == 11);
    CHECK(r->call_id == 7);
    CHECK(r->frames.size() == crash_report_max_frames);
    CHECK(r->running.size() == crash_report_max_running);
    CHECK(r->modules.size() == crash_report_max_modules);
}
