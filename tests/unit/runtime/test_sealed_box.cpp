// A sealed box (runtime/sealed_box.hpp): only the holder of the key it was sealed to opens it,
// and a box changed anywhere, cut short, or with records dropped is refused.
#include <catch2/catch.hpp>
#include <string>

#include "runtime/sealed_box.hpp"
#include "sky/errors.hpp"

using namespace sky::detail;

TEST_CASE("sealed box: the holder of the key opens what was sealed to it", "[seal][box]") {
    const X25519Key node;
    for (const std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{600u << 10}}) {
        std::string plain(n, '\0');
        for (std::size_t i = 0; i < n; ++i) plain[i] = static_cast<char>('a' + i % 26);
        const std::string box = seal_box(node.public_key(), plain);
        CHECK(open_box(node, box) == plain);
        // Ciphertext only: the content is not in it, and each box has a key of its own.
        if (n >= 100) CHECK(box.find(plain.substr(0, 100)) == std::string::npos);
        CHECK(seal_box(node.public_key(), plain) != box);
    }
    // The key survives being kept as its private half (a file between two steps).
    const X25519Key again(node.private_key());
    CHECK(again.public_key() == node.public_key());
    CHECK(open_box(again, seal_box(node.public_key(), "kept")) == "kept");
}

TEST_CASE("sealed box: another key, a changed byte, a cut or a dropped record is refused",
          "[seal][box]") {
    const X25519Key node, other;
    const std::string secret = "the image's secret";
    const std::string box = seal_box(node.public_key(), secret);
    CHECK_THROWS_AS(open_box(other, box), sky::ProtocolError);
    for (std::size_t i = 0; i < box.size(); ++i) {
        std::string bad = box;
        bad[i] ^= 0x01;
        INFO("byte " << i);
        CHECK_THROWS_AS(open_box(node, bad), sky::ProtocolError);
    }
    for (std::size_t cut = 0; cut < box.size(); ++cut)
        CHECK_THROWS_AS(open_box(node, box.substr(0, cut)), sky::ProtocolError);
    // A box of two records (the content over one record's 256 KiB) without its second.
    const std::string big(300u << 10, 'x');
    const std::string two = seal_box(node.public_key(), big);
    const std::size_t first = 32 + 4 + (256u << 10) + 16;
    REQUIRE(two.size() > first);
    try {
        (void)open_box(node, two.substr(0, first));
        FAIL("a box without its last record was opened");
    } catch (const sky::ProtocolError& e) {
        CHECK(std::string(e.what()).find("records missing") != std::string::npos);
    }
    CHECK(open_box(node, two) == big);
}
