// src/util: encodings, SHA-256, text, environment and randomness, with their edge cases (empty
// input, padding, invalid input). Known answers come from RFC 4648 §10 and FIPS 180-2.
#include <stdlib.h>

#include <array>
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "sky/errors.hpp"
#include "util/digest.hpp"
#include "util/encoding.hpp"
#include "util/env.hpp"
#include "util/random.hpp"
#include "util/shell.hpp"
#include "util/text.hpp"

using namespace sky::detail;

TEST_CASE("util: base64 encodes the RFC 4648 vectors, with and without padding", "[util]") {
    CHECK(base64_encode("") == "");
    CHECK(base64_encode("f") == "Zg==");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK(base64_encode("foo") == "Zm9v");
    CHECK(base64_encode("foob") == "Zm9vYg==");
    CHECK(base64_encode("fooba") == "Zm9vYmE=");
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
    CHECK(base64_encode("f", false) == "Zg");
    CHECK(base64_encode("fo", false) == "Zm8");
    CHECK(base64_encode("foo", false) == "Zm9v");
    // Every byte value, and the two characters beyond the letters and digits.
    CHECK(base64_encode(std::string("\xfb\xff\xbf", 3)) == "+/+/");
    CHECK(base64_encode(std::string("\0\0", 2)) == "AAA=");
}

TEST_CASE("util: base64 decodes what it encodes, padded or not", "[util]") {
    std::string all;
    for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
    for (std::size_t n = 0; n <= all.size(); n += (n < 8 ? 1 : 37)) {
        const std::string data = all.substr(0, n);
        CHECK(base64_decode(base64_encode(data)) == data);
        CHECK(base64_decode(base64_encode(data, false)) == data);
    }
    CHECK(base64_decode("") == "");
    CHECK(base64_decode("Zm9v\nYmFy\r\n") == "foobar");  // line breaks (PEM, user-data)
    CHECK(base64_decode(" Zg = = ") == "f");
}

TEST_CASE("util: base64 refuses what is not base64", "[util]") {
    CHECK_THROWS_AS(base64_decode("dm!s"), sky::Error);      // outside the alphabet
    CHECK_THROWS_AS(base64_decode("Zm9v-_"), sky::Error);    // the URL-safe alphabet is not base64
    CHECK_THROWS_AS(base64_decode("Z"), sky::Error);         // a dangling character
    CHECK_THROWS_AS(base64_decode("Zm9vY"), sky::Error);     // the same after whole groups
    CHECK_THROWS_AS(base64_decode("Zg==Zg=="), sky::Error);  // data after padding
    CHECK_THROWS_AS(base64_decode("Zg="), sky::Error);       // padding that does not complete
    CHECK_THROWS_AS(base64_decode("Zm9v="), sky::Error);     // padding after a whole group
    CHECK_THROWS_AS(base64_decode("="), sky::Error);         // padding alone
    CHECK_THROWS_AS(base64_decode("Zm\x80v"), sky::Error);   // a byte above ASCII
    CHECK_THROWS_AS(base64_decode(std::string("Zm\0v", 4)), sky::Error);  // an embedded NUL
}

TEST_CASE("util: hex_encode is lowercase, two characters a byte", "[util]") {
    CHECK(hex_encode("") == "");
    CHECK(hex_encode(std::string("\x00\x01\x7f\x80\xff", 5)) == "00017f80ff");
    CHECK(hex_encode("sky") == "736b79");
}

TEST_CASE("util: url_encode keeps RFC 3986 unreserved characters only", "[util]") {
    CHECK(url_encode("") == "");
    CHECK(url_encode("AZaz09-_.~") == "AZaz09-_.~");
    CHECK(url_encode("a b/c+d=e&f") == "a%20b%2Fc%2Bd%3De%26f");
    CHECK(url_encode("a b/c", /*keep_slash=*/true) == "a%20b/c");
    CHECK(url_encode("\xE1\x88\xB4") == "%E1%88%B4");  // UTF-8 bytes, uppercase hex
    CHECK(url_encode(std::string("\0", 1)) == "%00");
}

TEST_CASE("util: url_decode decodes %XX and leaves everything else", "[util]") {
    CHECK(url_decode("") == "");
    CHECK(url_decode("a%20b%2fc%2F") == "a b/c/");  // either case
    CHECK(url_decode("a+b") == "a+b");              // '+' is a space only in forms
    CHECK(url_decode("%zz%4") == "%zz%4");          // not an escape: kept as it is
    CHECK(url_decode("%") == "%");
    CHECK(url_decode("100%") == "100%");
    CHECK(url_decode("%00") == std::string("\0", 1));
    const std::string text = "key=v&l/ü~ %";
    CHECK(url_decode(url_encode(text)) == text);
    CHECK(url_decode(url_encode(text, true)) == text);
}

TEST_CASE("util: SHA-256 matches FIPS 180-2, in one piece or many", "[util]") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256("abc").size() == 32);
    CHECK(hex_encode(sha256("abc")) == sha256_hex("abc"));

    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    const std::string expected = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
    CHECK(sha256_hex(two_blocks) == expected);
    Sha256 pieces;
    for (char c : two_blocks) pieces.update(std::string_view(&c, 1));
    CHECK(pieces.finish_hex() == expected);
    CHECK_THROWS_AS(pieces.update("more"), sky::Error);  // spent
    Sha256 nothing;
    CHECK(nothing.finish_hex() == sha256_hex(""));
}

TEST_CASE("util: trim, case and case-insensitive equality", "[util]") {
    CHECK(trim("") == "");
    CHECK(trim(" \t\r\n") == "");
    CHECK(trim("  a b \n") == "a b");
    CHECK(trim("x") == "x");
    CHECK(to_lower("AbC-1") == "abc-1");
    CHECK(to_upper("aBc-1") == "ABC-1");
    CHECK(iequals("Host", "hOST"));
    CHECK_FALSE(iequals("Host", "Hos"));
    CHECK(iequals("", ""));
}

TEST_CASE("util: env_or treats unset and empty alike", "[util]") {
    const char* name = "SKY_TEST_UTIL_ENV_OR";
    ::unsetenv(name);
    CHECK(env_or(name) == "");
    CHECK(env_or(name, "fallback") == "fallback");
    ::setenv(name, "", 1);
    CHECK(env_or(name, "fallback") == "fallback");
    ::setenv(name, "value", 1);
    CHECK(env_or(name, "fallback") == "value");
    ::unsetenv(name);
}

TEST_CASE("util: random_hex has the length asked for and does not repeat", "[util]") {
    CHECK(random_hex(0).empty());
    CHECK(random_hex(1).size() == 1);
    CHECK(random_hex(7).size() == 7);
    std::set<std::string> seen;
    for (int i = 0; i < 64; ++i) {
        std::string s = random_hex(32);
        CHECK(s.find_first_not_of("0123456789abcdef") == std::string::npos);
        seen.insert(s);
    }
    CHECK(seen.size() == 64);
    std::array<std::byte, 0> none{};
    random_bytes(none);  // an empty span is fine
}

TEST_CASE("util: shell_quote makes one word of anything", "[util]") {
    CHECK(shell_quote("") == "''");
    CHECK(shell_quote("a b") == "'a b'");
    CHECK(shell_quote("it's") == "'it'\\''s'");
}
