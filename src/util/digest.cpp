#include "util/digest.hpp"

#include <openssl/evp.h>

#include "sky/errors.hpp"
#include "util/encoding.hpp"

namespace sky::detail {

struct Sha256::Ctx {
    EVP_MD_CTX* md = nullptr;
    bool done = false;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
    ctx_->md = EVP_MD_CTX_new();
    if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(ctx_->md);
        throw sky::Error("SHA-256 failed (OpenSSL EVP_DigestInit)");
    }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::update(std::string_view data) {
    if (ctx_->done) throw sky::Error("SHA-256: update after finish");
    if (EVP_DigestUpdate(ctx_->md, data.data(), data.size()) != 1)
        throw sky::Error("SHA-256 failed (OpenSSL EVP_DigestUpdate)");
}

std::string Sha256::finish() {
    if (ctx_->done) throw sky::Error("SHA-256: finish called twice");
    ctx_->done = true;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_DigestFinal_ex(ctx_->md, md, &len) != 1)
        throw sky::Error("SHA-256 failed (OpenSSL EVP_DigestFinal)");
    return std::string(reinterpret_cast<const char*>(md), len);
}

std::string Sha256::finish_hex() { return hex_encode(finish()); }

std::string sha256(std::string_view data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
        throw sky::Error("SHA-256 failed (OpenSSL EVP_Digest)");
    return std::string(reinterpret_cast<const char*>(md), len);
}

std::string sha256_hex(std::string_view data) { return hex_encode(sha256(data)); }

}  // namespace sky::detail
