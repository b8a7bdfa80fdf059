#pragma once
/// \file A gzip bomb for tests: a small, valid gzip stream that decodes to a huge run of zero
/// bytes (about 160:1: 13 bits per 258 bytes). Written by hand (fixed-Huffman deflate: one literal,
/// then length-258/distance-1 copies) so the tests need no zlib of their own.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sky::test {

namespace gzip_bomb_detail {

class BitWriter {
public:
    explicit BitWriter(std::string& out) : out_(out) {}
    /// Header fields and extra bits: least significant bit first.
    void bits(std::uint32_t value, int count) {
        for (int i = 0; i < count; ++i) bit((value >> i) & 1u);
    }
    /// Huffman codes: most significant bit first (RFC 1951, 3.1.1).
    void code(std::uint32_t value, int count) {
        for (int i = count - 1; i >= 0; --i) bit((value >> i) & 1u);
    }
    void flush() {
        if (used_ > 0) out_.push_back(static_cast<char>(byte_));
        byte_ = 0;
        used_ = 0;
    }

private:
    void bit(std::uint32_t b) {
        byte_ |= static_cast<std::uint8_t>(b << used_);
        if (++used_ == 8) flush();
    }
    std::string& out_;
    std::uint8_t byte_ = 0;
    int used_ = 0;
};

inline std::uint32_t crc32_of_zeros(std::size_t n) {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) crc = table[crc & 0xFFu] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

inline void le32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

}  // namespace gzip_bomb_detail

/// A gzip file whose content is at least `min_decoded` zero bytes (rounded up to 1 + 258·k).
/// 1 GiB decodes from about 6.5 MiB.
inline std::string gzip_bomb(std::size_t min_decoded) {
    using namespace gzip_bomb_detail;
    const std::size_t copies = min_decoded <= 1 ? 0 : (min_decoded - 1 + 257) / 258;
    const std::size_t decoded = 1 + copies * 258;
    std::string out = {'\x1f', '\x8b', '\x08', '\0', '\0', '\0', '\0', '\0', '\0', '\x03'};
    out.reserve(out.size() + copies * 13 / 8 + 32);
    BitWriter w(out);
    w.bits(1, 1);     // BFINAL
    w.bits(1, 2);     // BTYPE 01: fixed Huffman codes
    w.code(0x30, 8);  // literal 0
    for (std::size_t i = 0; i < copies; ++i) {
        w.code(0xC5, 8);  // length symbol 285: 258 bytes, no extra bits
        w.code(0, 5);     // distance code 0: distance 1
    }
    w.code(0, 7);  // end of block (256)
    w.flush();
    le32(out, crc32_of_zeros(decoded));
    le32(out, static_cast<std::uint32_t>(decoded & 0xFFFFFFFFu));
    return out;
}

}  // namespace sky::test
