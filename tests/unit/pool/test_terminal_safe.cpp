// Remote lines on the user's terminal: control characters (escape sequences, CR, BEL, C1) are
// shown escaped, never interpreted; tabs and UTF-8 text pass.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "pool/display.hpp"

using sky::detail::terminal_safe;

TEST_CASE("terminal_safe escapes control characters, keeps tab and UTF-8", "[display][hygiene]") {
    CHECK(terminal_safe("plain text\twith tab") == "plain text\twith tab");
    CHECK(terminal_safe("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80") ==
          "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80");
    // OSC 52 (clipboard write), a title change, cursor movement, CR overwrite, BEL, backspace.
    CHECK(terminal_safe("\x1b]52;c;cm0gLXJmIH4=\x07") == "\\x1b]52;c;cm0gLXJmIH4=\\x07");
    CHECK(terminal_safe("\x1b[2J\x1b[1;1Hok") == "\\x1b[2J\\x1b[1;1Hok");
    CHECK(terminal_safe("fake\rreal") == "fake\\x0dreal");
    CHECK(terminal_safe("a\bb\x7f\n") == "a\\x08b\\x7f\\x0a");
    // C1 controls: CSI (U+009B) and OSC (U+009D) in UTF-8, and raw C1 bytes.
    CHECK(terminal_safe("\xc2\x9b"
                        "2J") == "\\u{9b}2J");
    CHECK(terminal_safe("\xc2\x9d"
                        "0;t") == "\\u{9d}0;t");
    CHECK(terminal_safe("\x9b"
                        "2J") == "\\x9b2J");
    // Invalid or truncated UTF-8, overlong forms and surrogates are escaped byte by byte.
    CHECK(terminal_safe("\xc0\xaf") == "\\xc0\\xaf");
    CHECK(terminal_safe("\xed\xa0\x80") == "\\xed\\xa0\\x80");
    CHECK(terminal_safe("\xe2\x9c") == "\\xe2\\x9c");
    CHECK(terminal_safe("") == "");
}

TEST_CASE("a worker's log line is printed escaped", "[display][hygiene]") {
    char* buffer = nullptr;
    std::size_t size = 0;
    std::FILE* out = ::open_memstream(&buffer, &size);
    REQUIRE(out);
    {
        sky::detail::DisplayRenderer renderer(sky::Display::log, out, false);
        renderer.show(sky::LogLine{0, "i-1", "done\x1b]0;pwned\x07\r", 0});
        std::fflush(out);
    }
    std::fclose(out);
    std::string printed(buffer, size);
    std::free(buffer);
    CHECK(printed == "[node 0] done\\x1b]0;pwned\\x07\\x0d\n");
    CHECK(printed.find('\x1b') == std::string::npos);
}
