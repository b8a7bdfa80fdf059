#pragma once
// Randomness for every secret and id sky makes (tokens, pool ids, temporary names).
#include <cstddef>
#include <span>
#include <string>

namespace sky::detail {

/// Fills `out` from OpenSSL's RAND_bytes (the kernel's generator behind a DRBG). Throws
/// sky::Error when it fails: a secret must never come from a weaker source.
void random_bytes(std::span<std::byte> out);

/// Random lowercase hex of n characters (RAND_bytes).
[[nodiscard]] std::string random_hex(std::size_t n);

}  // namespace sky::detail
