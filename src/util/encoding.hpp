#pragma once
// Byte-to-text encodings: base64 (RFC 4648), lowercase hex and percent-encoding (RFC 3986).
#include <string>
#include <string_view>

namespace sky::detail {

/// Standard base64 (RFC 4648 §4, "+/" alphabet), with "=" padding unless `pad` is false (SSH
/// fingerprints are written without it).
[[nodiscard]] std::string base64_encode(std::string_view data, bool pad = true);

/// Decodes standard base64. ASCII whitespace is skipped and padding is optional, but when present
/// it must be one or two '=' that complete the last group of four. Throws sky::Error on anything
/// else (a character outside the alphabet, data after padding, a dangling character).
[[nodiscard]] std::string base64_decode(std::string_view text);

/// Lowercase hex of raw bytes, two characters per byte.
[[nodiscard]] std::string hex_encode(std::string_view bytes);

/// Percent-encodes everything but RFC 3986 unreserved characters (A-Z a-z 0-9 - _ . ~), and '/'
/// when `keep_slash` (a URI path), as uppercase %XX: the form SigV4 signs and EC2 Query sends.
[[nodiscard]] std::string url_encode(std::string_view text, bool keep_slash = false);

/// Decodes %XX escapes (either case); a '%' not followed by two hex digits stays as it is, and a
/// '+' stays a '+' (callers decoding HTML forms replace it first).
[[nodiscard]] std::string url_decode(std::string_view text);

}  // namespace sky::detail
