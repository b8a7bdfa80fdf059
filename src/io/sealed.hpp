#pragma once
// The stream's cipher, in one place: once a connection's handshake has agreed on keys
// (runtime/auth.hpp: an X25519 exchange both ends authenticate with the pool token), every
// byte either way travels in sealed records, AES-256-GCM with a key per direction:
//
//   [u32 little-endian: n, the plaintext's length, 1..max_record] [n bytes of ciphertext] [16-byte
//   tag]
//
// The nonce is the record's number in its direction (4 zero bytes, then the count, big-endian),
// never sent: a record dropped, replayed, reordered or cut off, or a byte changed anywhere
// (the length too: it is the record's additional data), fails authentication, and the stream
// ends with a ProtocolError. Nothing of a record is used before its tag is checked.
//
// Two wrappers apply it, one per side of the wire: SealedTransport over a blocking Transport
// (the worker), SealedStream over an io::Stream (the pool's node connection), which passes bytes
// through unchanged until seal() turns the cipher on (the handshake before it is in clear).
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "io/stream.hpp"
#include "io/transport.hpp"

namespace sky::detail::io {

/// A direction's key.
using SealKey = std::array<std::byte, 32>;

/// One end's keys: `seal` for what it sends, `open` for what it receives (the other end's
/// `seal`).
struct SealKeys {
    SealKey seal{};
    SealKey open{};
};

/// The largest plaintext of one record, and what a record adds to it.
inline constexpr std::size_t seal_max_record = 256u << 10;
inline constexpr std::size_t seal_overhead = 4 + 16;

/// Seals one direction's records (a counter per key: one sealer per direction and stream).
class RecordSealer {
public:
    explicit RecordSealer(const SealKey& key);
    ~RecordSealer();
    RecordSealer(const RecordSealer&) = delete;
    RecordSealer& operator=(const RecordSealer&) = delete;
    /// Appends `plain` to `out` as records of at most seal_max_record bytes each.
    void seal(std::span<const std::byte> plain, std::vector<std::byte>& out);

private:
    void* ctx_;  // EVP_CIPHER_CTX
    std::uint64_t next_ = 0;
};

/// Opens one direction's records as their bytes arrive.
class RecordOpener {
public:
    explicit RecordOpener(const SealKey& key);
    ~RecordOpener();
    RecordOpener(const RecordOpener&) = delete;
    RecordOpener& operator=(const RecordOpener&) = delete;
    /// Where the next ciphertext goes: room for at least `want` bytes (grown as needed).
    std::span<std::byte> room(std::size_t want = 64u << 10);
    /// `n` bytes were written into room().
    void received(std::size_t n) noexcept { have_ += n; }
    /// Takes received ciphertext (already read elsewhere).
    void feed(std::span<const std::byte> bytes);
    /// Opens the whole records received into `out` (appended), or, when `direct` has room for
    /// the first whole record's plaintext, into `direct` (returns the bytes written there;
    /// then nothing goes to `out`). Throws ProtocolError for a record that fails
    /// authentication or claims a length out of range.
    std::size_t open(std::vector<std::byte>& out, std::span<std::byte> direct = {});
    /// Bytes of a record not complete yet (a stream that ends with some was cut off).
    [[nodiscard]] std::size_t partial() const noexcept { return have_ - pos_; }

private:
    bool open_one(std::byte* into);
    void* ctx_;
    std::uint64_t next_ = 0;
    std::vector<std::byte> buf_;
    std::size_t pos_ = 0, have_ = 0;
};

/// A Transport whose bytes travel sealed over `inner` (the worker's side, after the handshake).
class SealedTransport final : public Transport {
public:
    /// `already` is ciphertext read from `inner` before the wrapper took over.
    SealedTransport(std::unique_ptr<Transport> inner, const SealKeys& keys,
                    std::span<const std::byte> already = {});
    ~SealedTransport() override;
    /// Plaintext of authenticated records only; 0 at a clean end between records. Throws
    /// ProtocolError for a record that fails authentication or a stream cut inside one.
    std::size_t read_some(std::span<std::byte> buf) override;
    void write_all(std::span<const std::span<const std::byte>> bufs) override;
    void shutdown() noexcept override { inner_->shutdown(); }
    bool wait_readable(std::chrono::milliseconds timeout) override;
    [[nodiscard]] std::string describe() const override;

private:
    std::unique_ptr<Transport> inner_;
    RecordSealer sealer_;
    RecordOpener opener_;
    std::vector<std::byte> plain_;
    std::size_t plain_pos_ = 0;
    std::vector<std::byte> out_;
};

/// An io::Stream that passes bytes through until seal(), then carries them in sealed records
/// (the pool's side). A record that fails authentication ends the stream: the read completes
/// with boost::system::errc::bad_message and failure() says why.
class SealedStream final : public Stream {
public:
    explicit SealedStream(std::unique_ptr<Stream> inner);
    ~SealedStream() override;

    /// Turns the cipher on (on the strand, between reads and writes): `already` is ciphertext
    /// read from the stream before (it followed the handshake's last frame).
    void seal(const SealKeys& keys, std::span<const std::byte> already);
    [[nodiscard]] bool sealed() const noexcept {
        return sealed_flag_.load(std::memory_order_acquire);
    }

    executor_type get_executor() override { return inner_->get_executor(); }
    void async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) override;
    void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                          IoHandler handler) override;
    /// Passes through while not sealed; sealed, writes go through async_write_some (0).
    std::size_t try_write_some(std::span<const boost::asio::const_buffer> buffers) override;
    void close() noexcept override { inner_->close(); }
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] std::string failure() const override;

private:
    void read_more(boost::asio::mutable_buffer buffer, IoHandler handler);
    void write_rest(std::size_t plain, IoHandler handler);

    std::unique_ptr<Stream> inner_;
    std::unique_ptr<RecordSealer> sealer_;
    std::unique_ptr<RecordOpener> opener_;
    std::vector<std::byte> plain_;  // opened, not yet read
    std::size_t plain_pos_ = 0;
    std::vector<std::byte> out_;  // sealed, being written
    std::size_t out_pos_ = 0;
    std::atomic<bool> sealed_flag_{false};  // try_write_some runs on other threads
    mutable std::mutex fm_;
    std::string failure_;  // under fm_
};

}  // namespace sky::detail::io
