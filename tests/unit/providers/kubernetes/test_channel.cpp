// The channel protocol of exec and portforward (v4/v5.channel.k8s.io): frames, v5's close, the
// exit code from the status channel, port-forward's two-byte port headers, the exec query.
#include <catch2/catch.hpp>
#include <string>

#include "providers/kubernetes/channel.hpp"

using namespace sky::detail::kubernetes;

TEST_CASE("channel: a frame is the channel byte and the data, v5's close names the channel",
          "[kubernetes][channel]") {
    CHECK(encode_frame(0, "abc") == std::string("\0abc", 4));
    CHECK(encode_frame(2, "") == std::string("\2", 1));
    CHECK(encode_close(0) == std::string("\xff\0", 2));
    const std::string hello("\1hello", 6);
    const auto f = decode_frame(hello);
    REQUIRE(f);
    CHECK(f->channel == 1);
    CHECK(f->data == "hello");
    const std::string bytes("\2\0\xff", 3);
    const auto binary = decode_frame(bytes);
    REQUIRE(binary);
    CHECK(binary->data == std::string("\0\xff", 2));
    CHECK_FALSE(decode_frame(""));
    CHECK(encode_resize(80, 24) == std::string("\4") + R"({"Height":24,"Width":80})");
}

TEST_CASE(
    "channel: the status channel gives exit code 0 on Success and the code of a "
    "NonZeroExitCode failure",
    "[kubernetes][channel]") {
    auto s = parse_exec_status(R"({"metadata":{},"status":"Success"})");
    CHECK(s.exited);
    CHECK(s.exit_code == 0);
    s = parse_exec_status(
        R"({"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}})");
    CHECK(s.exited);
    CHECK(s.exit_code == 3);
    CHECK(s.message.empty());
    s = parse_exec_status(
        R"({"metadata":{},"status":"Failure","message":"OCI runtime exec failed: exec: \"nope\": executable file not found in $PATH: unknown","reason":"InternalError","details":{"causes":[{"message":"x"}]}})");
    CHECK_FALSE(s.exited);
    CHECK_THAT(s.message, Catch::Contains("executable file not found"));
    s = parse_exec_status(
        R"({"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"x3"}]}})");
    CHECK_FALSE(s.exited);
    s = parse_exec_status("not json");
    CHECK_FALSE(s.exited);
    CHECK_THAT(s.message, Catch::Contains("not a Status"));
}

TEST_CASE(
    "channel: port-forward's first bytes on a channel are the port, little-endian, "
    "whatever the message boundaries",
    "[kubernetes][channel]") {
    PortHeader whole;
    CHECK(whole.strip(std::string("\x58\x1b"
                                  "data",
                                  6)) == "data");  // 7000 = 0x1b58
    CHECK(whole.port() == 7000);
    CHECK(whole.strip("more") == "more");
    PortHeader split;
    CHECK(split.strip(std::string("\x50", 1)).empty());
    CHECK_FALSE(split.port());
    CHECK(split.strip(std::string("\0", 1)).empty());
    CHECK(split.port() == 80);
    CHECK(split.strip("x") == "x");
}

TEST_CASE("channel: the exec query has one command= per argv element, encoded",
          "[kubernetes][channel]") {
    const std::vector<std::string> argv = {"sh", "-c", "echo hi; exit 3"};
    CHECK(exec_path("", "ns", "p", "", argv, false) ==
          "/api/v1/namespaces/ns/pods/p/exec?command=sh&command=-c&command=echo%20hi%3B%20exit%203&"
          "stdout=true&stderr=true");
    CHECK(exec_path("/prefix", "ns", "p", "main", argv, true) ==
          "/prefix/api/v1/namespaces/ns/pods/p/"
          "exec?command=sh&command=-c&command=echo%20hi%3B%20exit%203&"
          "container=main&stdin=true&stdout=true&stderr=true");
    CHECK(portforward_path("", "sky-test", "p", 7000) ==
          "/api/v1/namespaces/sky-test/pods/p/portforward?ports=7000");
}
