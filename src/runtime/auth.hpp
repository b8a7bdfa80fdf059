#pragma once
// Mutual challenge-response authentication of a connection between a client and a worker (the
// nonces, like every other secret, come from util/random.hpp).
//
// The pool token never travels. On a new connection:
//   worker -> client  auth frame: Nw                                   (32 bytes)
//   client -> worker  auth frame: Nc || HMAC-SHA256(token, "c"||Nw||Nc) (64 bytes)
//   worker -> client  auth frame: HMAC-SHA256(token, "w"||Nc||Nw)      (32 bytes)
// and only then the hellos. Every auth frame has a fixed size, so nothing of variable size is
// decoded from a peer before it has proven that it holds the token.
//
// A sealing worker (one whose stream crosses a network sky does not otherwise encrypt: Slurm's
// cluster network) adds an ephemeral X25519 public key to each side's frame, flags its challenge
// with auth_flag_seal, and both MACs cover both keys:
//   worker -> client  Nw || Ew                                          (64 bytes, flag seal)
//   client -> worker  Nc || Ec || HMAC-SHA256(token, "C"||Nw||Ew||Nc||Ec) (96 bytes, flag seal)
//   worker -> client  HMAC-SHA256(token, "W"||Nc||Ec||Nw||Ew)           (32 bytes)
// Every byte after the worker's proof travels in sealed records (io/sealed.hpp) under keys
// HKDF-SHA256(salt = token, X25519(e, E'), info = direction || Nw||Ew||Nc||Ec): a reader of the
// network sees only nonces and public keys, a peer without the token cannot complete either
// MAC, and a man in the middle who swaps a key breaks both.
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "io/sealed.hpp"
#include "io/transport.hpp"
#include "runtime/protocol.hpp"
#include "util/random.hpp"  // the nonces' source, and what this header's users make tokens with

namespace sky::detail {

inline constexpr std::size_t auth_nonce_size = 32;
inline constexpr std::size_t auth_mac_size = 32;
/// The largest auth frame (the client's answer); readers use it as their frame limit until the
/// peer is authenticated.
inline constexpr std::uint64_t auth_max_frame = auth_nonce_size + auth_mac_size;

using AuthBlock = std::array<std::byte, 32>;

/// Header flag of a sealing worker's challenge and of the client's answer to it.
inline constexpr std::uint16_t auth_flag_seal = 1;
/// A sealing client's answer: Nc, Ec and the MAC.
inline constexpr std::uint64_t auth_sealed_answer = 3 * sizeof(AuthBlock);

/// An X25519 key pair (OpenSSL), made fresh.
class X25519Key {
public:
    X25519Key();
    /// The key whose private half is `private_key` (one kept in a private file between two
    /// steps of a node's bring-up); throws sky::Error when OpenSSL refuses it.
    explicit X25519Key(const AuthBlock& private_key);
    ~X25519Key();
    X25519Key(const X25519Key&) = delete;
    X25519Key& operator=(const X25519Key&) = delete;
    [[nodiscard]] AuthBlock public_key() const;
    /// The private half (to keep in a 0600 file; wipe the copy once written).
    [[nodiscard]] AuthBlock private_key() const;
    /// The shared secret with `peer` (a public key); throws ProtocolError for a key that
    /// gives none (a low-order point).
    [[nodiscard]] AuthBlock agree(const AuthBlock& peer) const;

private:
    void* key_;  // EVP_PKEY
};

/// HKDF-SHA256 (RFC 5869) of one 32-byte block: Expand(Extract(salt, ikm), info).
AuthBlock hkdf_sha256(std::string_view salt, std::span<const std::byte> ikm,
                      std::span<const std::byte> info);

/// The token two ends agree on without sending it: from a static X25519 exchange, the client's
/// key `mine` (or the worker's) and the other end's public key `peer`, as 64 hex digits. Only
/// public keys travel (a Slurm step's stdin and output are in clear on the cluster network).
std::string agreed_token(const X25519Key& mine, const AuthBlock& peer);
/// "x25519:" and 64 hex digits: how a public key is written on a launch's stdin and in a port
/// file.
std::string public_key_text(const AuthBlock& key);
/// Reads public_key_text(); nullopt when `text` is not one.
std::optional<AuthBlock> parse_public_key(std::string_view text);

/// HMAC-SHA256(token, tag || a || b).
AuthBlock auth_mac(std::string_view token, char tag, const AuthBlock& a, const AuthBlock& b);

/// Constant-time equality (CRYPTO_memcmp): the time a check takes tells nothing about the MAC.
bool auth_equal(const AuthBlock& a, const AuthBlock& b) noexcept;

/// An auth frame from the worker (`what`: "challenge", "proof") as its 32-byte block; throws
/// ProtocolError ("authentication failed: ...") for a frame of another type or size.
AuthBlock worker_auth_block(const Frame& f, const char* what);

/// The client's answer to the worker's challenge: the auth frame to send, the proof the
/// worker must send back, and the stream's keys when the stream is sealed.
struct ClientAuthAnswer {
    Buffer frame;
    AuthBlock expected_proof{};
    std::optional<io::SealKeys> keys;
};
/// Answers the worker's challenge `nw` with a fresh nonce.
ClientAuthAnswer client_auth_answer(std::string_view token, const AuthBlock& nw);
/// Answers the worker's challenge frame: a sealing one (flag, 64 bytes) with a sealed answer,
/// a plain one with a plain answer unless `need_seal`, which refuses it (ProtocolError: the
/// worker does not encrypt its stream). Throws ProtocolError for any other frame.
ClientAuthAnswer client_auth_answer(std::string_view token, const Frame& challenge, bool need_seal);
/// Throws ProtocolError ("authentication failed: ...") when `proof` is not the worker's answer.
void check_worker_proof(const ClientAuthAnswer& answer, const AuthBlock& proof);

/// The client's side on a fresh connection: reads the worker's challenge through `reader`
/// (whose frame limit must be auth_max_frame), answers it, and checks the worker's proof.
/// On return the worker is authenticated and `reader` may hold the frames that followed the
/// proof (the worker's hello). Throws ProtocolError ("authentication failed: ...") when the peer
/// does not prove it holds `token`, sky::Error when the transport fails or `timeout` passes
/// while waiting for the worker.
void client_authenticate(Transport& t, FrameReader& reader, std::string_view token,
                         std::chrono::milliseconds timeout);
/// The same, answering a sealing worker: returns the stream's keys when the worker seals (the
/// caller then reads and writes through io::SealedTransport, given reader.take_buffered()).
std::optional<io::SealKeys> client_authenticate(Transport& t, FrameReader& reader,
                                                std::string_view token,
                                                std::chrono::milliseconds timeout, bool need_seal);

/// How many peers may be in the handshake at once, in all and from one IP address.
inline constexpr std::size_t auth_max_pending = 64;
inline constexpr std::size_t auth_pending_per_source = 4;

/// The worker's side. Authenticates connections until one proves it holds `token`:
/// - `listen_fd` >= 0: accepts on it (several unauthenticated peers at once, each dropped after
///   `per_peer` or at its first wrong byte), so that squatters cannot keep the client out: a
///   peer that has sent bytes is never dropped for a newcomer, at most auth_pending_per_source
///   peers of one address wait at once (a newcomer from there replaces the oldest silent one),
///   and with `allow_from` (an IP address) set, connections from any other address are closed
///   at once;
/// - else the one connected descriptor `fd` (a socketpair from a Local client).
/// Returns the authenticated descriptor (blocking, the worker's proof already sent), or -1 when
/// `deadline` passed or the single peer failed. Each dropped peer is reported through `note`.
int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note,
                        std::string_view allow_from);
/// The same; with `keys` set, a sealing worker: each peer gets a sealing challenge, only a
/// sealed answer is accepted, and `*keys` receives the authenticated connection's keys. With
/// `wake_fd` (>= 0, an eventfd) readable, it returns -1 at once: a caller that waits long for
/// its client (the worker's door) is stopped without ending handshakes at fixed rounds.
int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note,
                        std::string_view allow_from, std::optional<io::SealKeys>* keys,
                        int wake_fd = -1);
/// The same, from any address.
int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note);

}  // namespace sky::detail
