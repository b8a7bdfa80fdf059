#pragma once
// SHA-256 (OpenSSL EVP): content hashes, fingerprints and signatures all use this one.
#include <memory>
#include <string>
#include <string_view>

namespace sky::detail {

/// The raw 32-byte SHA-256 of `data`.
[[nodiscard]] std::string sha256(std::string_view data);

/// Lowercase hex SHA-256 of `data` (64 characters).
[[nodiscard]] std::string sha256_hex(std::string_view data);

/// SHA-256 over data given in pieces (a file read in blocks).
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(std::string_view data);
    /// The raw digest; the hasher is spent afterwards.
    [[nodiscard]] std::string finish();
    /// Lowercase hex digest; the hasher is spent afterwards.
    [[nodiscard]] std::string finish_hex();

private:
    struct Ctx;
    std::unique_ptr<Ctx> ctx_;
};

}  // namespace sky::detail
