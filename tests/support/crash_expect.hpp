#pragma once
// What the crash-forensics tests expect of a call that wrote through a null pointer and killed
// its worker (api.md §3), wherever the worker ran.
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "sky/errors.hpp"

namespace sky::test {

/// `e` names SIGSEGV, the call as started, `function` (qualified, as registered) as the
/// innermost frame, at `file`:`line` (empty and 0: a program without debug information), and
/// `last_output` as the call's last output line, in its accessors and in what().
inline void expect_null_write(const sky::NodeLostError& e, std::string_view function,
                              std::string_view file, int line, std::string_view last_output) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.reason() == sky::NodeLostError::Reason::worker_crashed);
    CHECK(e.signal() == SIGSEGV);
    CHECK(e.started());
    REQUIRE_FALSE(e.stack().empty());
    const sky::StackFrame& top = e.stack().front();
    CHECK(top.function.find(function) != std::string::npos);
    if (file.empty())
        CHECK(top.file.empty());
    else
        CHECK(top.file.find(file) != std::string::npos);
    CHECK(top.line == line);
    CHECK(top.address != 0);
    REQUIRE_FALSE(e.remote_log().empty());
    CHECK(e.remote_log().back() == last_output);
    CHECK(what.find("SIGSEGV (signal 11) while running " + std::string(function)) !=
          std::string::npos);
    CHECK(what.find("#0 " + std::string(function)) != std::string::npos);
    if (!file.empty())
        CHECK(what.find(std::string(file) + ":" + std::to_string(line)) != std::string::npos);
    CHECK(what.find(std::string(last_output)) != std::string::npos);
}

}  // namespace sky::test
