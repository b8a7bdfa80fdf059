#include "io/sealed.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/system/errc.hpp>
#include <cstring>

#include "sky/errors.hpp"

namespace sky::detail::io {

namespace {

constexpr std::size_t tag_size = 16;
constexpr std::size_t len_size = 4;

EVP_CIPHER_CTX* ctx_of(void* p) { return static_cast<EVP_CIPHER_CTX*>(p); }
const unsigned char* uc(const std::byte* p) { return reinterpret_cast<const unsigned char*>(p); }
unsigned char* uc(std::byte* p) { return reinterpret_cast<unsigned char*>(p); }

// The record's nonce: 4 zero bytes, then its number, big-endian.
std::array<unsigned char, 12> nonce_of(std::uint64_t n) {
    std::array<unsigned char, 12> iv{};
    for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<unsigned char>(n >> (56 - 8 * i));
    return iv;
}

void* new_ctx(const SealKey& key, bool encrypt) {
    EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
    if (!c) throw Error("OpenSSL: cannot make a cipher context");
    const int ok = encrypt
                       ? EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, uc(key.data()), nullptr)
                       : EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), nullptr, uc(key.data()), nullptr);
    if (ok != 1) {
        EVP_CIPHER_CTX_free(c);
        throw Error("OpenSSL: AES-256-GCM is not available");
    }
    return c;
}

std::uint32_t load_len(const std::byte* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(p[i]);
    return v;
}

}  // namespace

// ---- records -----------------------------------------------------------------------------------

RecordSealer::RecordSealer(const SealKey& key) : ctx_(new_ctx(key, true)) {}
RecordSealer::~RecordSealer() { EVP_CIPHER_CTX_free(ctx_of(ctx_)); }

void RecordSealer::seal(std::span<const std::byte> plain, std::vector<std::byte>& out) {
    while (!plain.empty()) {
        const std::size_t n = std::min(plain.size(), seal_max_record);
        const std::size_t at = out.size();
        out.resize(at + len_size + n + tag_size);
        std::byte* rec = out.data() + at;
        for (int i = 0; i < 4; ++i) rec[i] = static_cast<std::byte>(n >> (8 * i));
        const auto iv = nonce_of(next_++);
        int len = 0;
        EVP_CIPHER_CTX* c = ctx_of(ctx_);
        if (EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv.data()) != 1 ||
            EVP_EncryptUpdate(c, nullptr, &len, uc(rec), len_size) != 1 ||
            EVP_EncryptUpdate(c, uc(rec + len_size), &len, uc(plain.data()), static_cast<int>(n)) !=
                1 ||
            EVP_EncryptFinal_ex(c, uc(rec + len_size + n), &len) != 1 ||
            EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, tag_size, rec + len_size + n) != 1)
            throw Error("OpenSSL: sealing a record failed");
        plain = plain.subspan(n);
    }
}

RecordOpener::RecordOpener(const SealKey& key) : ctx_(new_ctx(key, false)) {}
RecordOpener::~RecordOpener() { EVP_CIPHER_CTX_free(ctx_of(ctx_)); }

std::span<std::byte> RecordOpener::room(std::size_t want) {
    if (pos_ > 0 && (pos_ == have_ || buf_.size() - have_ < want)) {
        std::memmove(buf_.data(), buf_.data() + pos_, have_ - pos_);
        have_ -= pos_;
        pos_ = 0;
    }
    if (buf_.size() - have_ < want) buf_.resize(have_ + want);
    return {buf_.data() + have_, buf_.size() - have_};
}

void RecordOpener::feed(std::span<const std::byte> bytes) {
    if (bytes.empty()) return;
    auto r = room(bytes.size());
    std::memcpy(r.data(), bytes.data(), bytes.size());
    received(bytes.size());
}

bool RecordOpener::open_one(std::byte* into) {
    const std::byte* rec = buf_.data() + pos_;
    const std::size_t n = load_len(rec);
    const auto iv = nonce_of(next_++);
    EVP_CIPHER_CTX* c = ctx_of(ctx_);
    int len = 0;
    unsigned char tag[tag_size];
    std::memcpy(tag, rec + len_size + n, tag_size);
    const bool ok =
        EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, iv.data()) == 1 &&
        EVP_DecryptUpdate(c, nullptr, &len, uc(rec), len_size) == 1 &&
        EVP_DecryptUpdate(c, uc(into), &len, uc(rec + len_size), static_cast<int>(n)) == 1 &&
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, tag_size, tag) == 1 &&
        EVP_DecryptFinal_ex(c, uc(into) + len, &len) == 1;
    if (!ok) {
        // What was written is not a record's plaintext: never handed on.
        OPENSSL_cleanse(into, n);
        throw ProtocolError(
            "a sealed record failed authentication (changed, replayed, reordered or not from "
            "the peer): the stream is closed");
    }
    pos_ += len_size + n + tag_size;
    return true;
}

std::size_t RecordOpener::open(std::vector<std::byte>& out, std::span<std::byte> direct) {
    std::size_t direct_n = 0;
    while (have_ - pos_ >= len_size) {
        const std::size_t n = load_len(buf_.data() + pos_);
        if (n == 0 || n > seal_max_record)
            throw ProtocolError("a sealed record claims " + std::to_string(n) + " bytes (1 to " +
                                std::to_string(seal_max_record) + "): the stream is closed");
        if (have_ - pos_ < len_size + n + tag_size) break;
        if (out.empty() && direct.size() - direct_n >= n) {
            open_one(direct.data() + direct_n);
            direct_n += n;
            continue;
        }
        if (direct_n > 0) break;  // the rest waits for the next read
        const std::size_t at = out.size();
        out.resize(at + n);
        open_one(out.data() + at);
    }
    if (pos_ == have_) pos_ = have_ = 0;
    return direct_n;
}

// ---- the worker's side: a blocking Transport ---------------------------------------------------

SealedTransport::SealedTransport(std::unique_ptr<Transport> inner, const SealKeys& keys,
                                 std::span<const std::byte> already)
    : inner_(std::move(inner)), sealer_(keys.seal), opener_(keys.open) {
    opener_.feed(already);
}

SealedTransport::~SealedTransport() = default;

std::size_t SealedTransport::read_some(std::span<std::byte> buf) {
    for (;;) {
        if (plain_pos_ < plain_.size()) {
            const std::size_t n = std::min(buf.size(), plain_.size() - plain_pos_);
            std::memcpy(buf.data(), plain_.data() + plain_pos_, n);
            plain_pos_ += n;
            if (plain_pos_ == plain_.size()) {
                plain_.clear();
                plain_pos_ = 0;
            }
            return n;
        }
        if (const std::size_t n = opener_.open(plain_, buf)) return n;
        if (!plain_.empty()) continue;
        auto room = opener_.room();
        const std::size_t got = inner_->read_some(room);
        if (got == 0) {
            if (opener_.partial() > 0)
                throw ProtocolError("the sealed stream from " + inner_->describe() +
                                    " ended inside a record");
            return 0;
        }
        opener_.received(got);
    }
}

void SealedTransport::write_all(std::span<const std::span<const std::byte>> bufs) {
    out_.clear();
    for (const auto& b : bufs) sealer_.seal(b, out_);
    if (out_.empty()) return;
    std::span<const std::byte> one[] = {{out_.data(), out_.size()}};
    inner_->write_all(one);
    // A large write's sealed copy is not kept for the next small one.
    if (out_.capacity() > (8u << 20)) std::vector<std::byte>().swap(out_);
}

bool SealedTransport::wait_readable(std::chrono::milliseconds timeout) {
    if (plain_pos_ < plain_.size()) return true;
    return inner_->wait_readable(timeout);
}

std::string SealedTransport::describe() const { return inner_->describe() + " (sealed)"; }

// ---- the pool's side: an io::Stream ------------------------------------------------------------

SealedStream::SealedStream(std::unique_ptr<Stream> inner) : inner_(std::move(inner)) {}
SealedStream::~SealedStream() = default;

void SealedStream::seal(const SealKeys& keys, std::span<const std::byte> already) {
    sealer_ = std::make_unique<RecordSealer>(keys.seal);
    opener_ = std::make_unique<RecordOpener>(keys.open);
    opener_->feed(already);
    sealed_flag_.store(true, std::memory_order_release);
}

void SealedStream::async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) {
    if (!opener_) return inner_->async_read_some(buffer, std::move(handler));
    read_more(buffer, std::move(handler));
}

void SealedStream::read_more(boost::asio::mutable_buffer buffer, IoHandler handler) {
    std::span<std::byte> into(static_cast<std::byte*>(buffer.data()), buffer.size());
    std::size_t n = 0;
    try {
        if (plain_pos_ == plain_.size()) {
            plain_.clear();
            plain_pos_ = 0;
            n = opener_->open(plain_, into);
        }
    } catch (const std::exception& e) {
        {
            std::lock_guard lk(fm_);
            failure_ = e.what();
        }
        inner_->close();
        return boost::asio::post(get_executor(), [h = std::move(handler)]() mutable {
            std::move(h)(boost::system::errc::make_error_code(boost::system::errc::bad_message), 0);
        });
    }
    if (n == 0 && plain_pos_ < plain_.size()) {
        n = std::min(into.size(), plain_.size() - plain_pos_);
        std::memcpy(into.data(), plain_.data() + plain_pos_, n);
        plain_pos_ += n;
    }
    if (n > 0)
        return boost::asio::post(get_executor(), [h = std::move(handler), n]() mutable {
            std::move(h)(boost::system::error_code{}, n);
        });
    auto room = opener_->room();
    inner_->async_read_some(
        boost::asio::mutable_buffer(room.data(), room.size()),
        [this, buffer, h = std::move(handler)](boost::system::error_code ec,
                                               std::size_t got) mutable {
            opener_->received(got);
            if (!ec) return read_more(buffer, std::move(h));
            // The end of the stream: what was whole is delivered first; a record cut off is
            // a stream that ended mid-write (the worker died), as for a frame cut off.
            std::size_t n = 0;
            try {
                std::span<std::byte> into(static_cast<std::byte*>(buffer.data()), buffer.size());
                n = opener_->open(plain_, into);
                if (n == 0 && plain_pos_ < plain_.size()) {
                    n = std::min(into.size(), plain_.size() - plain_pos_);
                    std::memcpy(into.data(), plain_.data() + plain_pos_, n);
                    plain_pos_ += n;
                }
            } catch (const std::exception& e) {
                std::lock_guard lk(fm_);
                failure_ = e.what();
                ec = boost::system::errc::make_error_code(boost::system::errc::bad_message);
            }
            std::move(h)(ec, n);
        });
}

void SealedStream::async_write_some(std::span<const boost::asio::const_buffer> buffers,
                                    IoHandler handler) {
    if (!sealer_) return inner_->async_write_some(buffers, std::move(handler));
    // Seals up to a few records' worth and writes all of it before completing: the bytes the
    // caller is told were written are on their way, whole records.
    out_.clear();
    out_pos_ = 0;
    std::size_t plain = 0;
    for (const auto& b : buffers) {
        if (plain >= 4 * seal_max_record) break;
        const std::size_t take = std::min(b.size(), 4 * seal_max_record - plain);
        sealer_->seal({static_cast<const std::byte*>(b.data()), take}, out_);
        plain += take;
    }
    if (plain == 0)
        return boost::asio::post(get_executor(), [h = std::move(handler)]() mutable {
            std::move(h)(boost::system::error_code{}, 0);
        });
    write_rest(plain, std::move(handler));
}

void SealedStream::write_rest(std::size_t plain, IoHandler handler) {
    std::array<boost::asio::const_buffer, 1> one{
        boost::asio::const_buffer(out_.data() + out_pos_, out_.size() - out_pos_)};
    // The array lives until the handler runs: kept in the handler's state.
    auto bufs = std::make_shared<std::array<boost::asio::const_buffer, 1>>(one);
    inner_->async_write_some(*bufs, [this, plain, bufs, h = std::move(handler)](
                                        boost::system::error_code ec, std::size_t n) mutable {
        out_pos_ += n;
        if (ec) return std::move(h)(ec, 0);
        if (out_pos_ < out_.size()) return write_rest(plain, std::move(h));
        std::move(h)(ec, plain);
    });
}

std::size_t SealedStream::try_write_some(std::span<const boost::asio::const_buffer> buffers) {
    if (sealed_flag_.load(std::memory_order_acquire)) return 0;
    return inner_->try_write_some(buffers);
}

std::string SealedStream::describe() const {
    return inner_->describe() + (sealed() ? " (sealed)" : "");
}

std::string SealedStream::failure() const {
    {
        std::lock_guard lk(fm_);
        if (!failure_.empty()) return failure_;
    }
    return inner_->failure();
}

}  // namespace sky::detail::io
