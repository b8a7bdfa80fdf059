// The public errors' what() (src/core/errors.cpp) shows what a worker sent (an exception's
// message, its output, a crash's function and file names) with its control characters escaped:
// a program that prints e.what() cannot be made to drive its terminal. The accessors keep the
// bytes as they came.
#include <catch2/catch.hpp>
#include <string>

#include "sky/errors.hpp"

TEST_CASE("what() escapes a worker's control characters, the accessors keep them",
          "[errors][security]") {
    const std::string hostile =
        "ok\x1b]0;pwned\x07\r\x1b[2J\xc2\x9b"
        "31m done\n\tnext";
    const sky::RemoteError r("fn\x1b[1m", 2, "i-1", "std::runtime_error\x1b", hostile, {});
    const std::string w = r.what();
    INFO(w);
    CHECK(w.find('\x1b') == std::string::npos);
    CHECK(w.find('\r') == std::string::npos);
    CHECK(w.find('\x07') == std::string::npos);
    CHECK(w.find("\xc2\x9b") == std::string::npos);
    CHECK(w.find("\\x1b]0;pwned\\x07\\x0d\\x1b[2J\\u009b31m done\n\tnext") != std::string::npos);
    CHECK(r.message() == hostile);

    sky::NodeLostError::Call c;
    c.function = "train\x1b[8m";
    c.signal = 11;
    c.stack.push_back({.function = "f\x1b", .file = "a\x1b.cpp", .line = 3});
    c.remote_log = {"line\x1b[31m red", "plain"};
    const sky::NodeLostError l(0, "i-0", sky::NodeLostError::Reason::worker_crashed, "exit\x1b[0m",
                               c);
    const std::string lw = l.what();
    INFO(lw);
    CHECK(lw.find('\x1b') == std::string::npos);
    CHECK(lw.find("line\\x1b[31m red") != std::string::npos);
    CHECK(lw.find("plain") != std::string::npos);
    REQUIRE(l.remote_log().size() == 2);
    CHECK(l.remote_log()[0] == "line\x1b[31m red");
}
