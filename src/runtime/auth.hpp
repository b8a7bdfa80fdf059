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
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

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

/// HMAC-SHA256(token, tag || a || b).
AuthBlock auth_mac(std::string_view token, char tag, const AuthBlock& a, const AuthBlock& b);

/// Constant-time equality (CRYPTO_memcmp): the time a check takes tells nothing about the MAC.
bool auth_equal(const AuthBlock& a, const AuthBlock& b) noexcept;

/// An auth frame from the worker (`what`: "challenge", "proof") as its 32-byte block; throws
/// ProtocolError ("authentication failed: ...") for a frame of another type or size.
AuthBlock worker_auth_block(const Frame& f, const char* what);

/// The client's answer to the worker's challenge: the auth frame to send, and the proof the
/// worker must send back.
struct ClientAuthAnswer {
    Buffer frame;
    AuthBlock expected_proof{};
};
/// Answers the worker's challenge `nw` with a fresh nonce.
ClientAuthAnswer client_auth_answer(std::string_view token, const AuthBlock& nw);
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
/// The same, from any address.
int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note);

}  // namespace sky::detail
