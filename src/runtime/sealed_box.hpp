#pragma once
// Bytes for the holder of one X25519 key that nobody else who sees them can read, or change
// unnoticed: how a node's bring-up sends what is secret over a channel sky does not encrypt
// (a Slurm step's stdin, in clear on the cluster network). The node makes a key in a private
// directory and says its public half (step one); the client seals to it and the node opens the
// box on the next step's stdin (step two). Only public keys and ciphertext cross.
//
//   box = E (the sender's fresh X25519 public key, 32 bytes) || records
//
// The records are io/sealed.hpp's AES-256-GCM records under HKDF-SHA256(salt "sky box v1",
// X25519(e, R), info E || R), R the node's public key; their plaintext is the content's length
// (8 bytes, little-endian) and then the content, so a box cut at a record's end is refused too.
// Like the worker's sealed stream, this keeps out a reader of the network, not one who rewrites
// it in flight (who could answer step one with a key of their own).
#include <string>
#include <string_view>
#include <vector>

#include "runtime/auth.hpp"

namespace sky::detail {

/// Seals `plain` to the holder of `recipient` (a fresh sender key per box).
[[nodiscard]] std::string seal_box(const AuthBlock& recipient, std::string_view plain);
/// Opens a box sealed to `mine`. Throws ProtocolError naming what is wrong (too short, a
/// record that fails authentication, cut off, records missing).
[[nodiscard]] std::string open_box(const X25519Key& mine, std::string_view box);

/// The largest content unbox_main accepts (a step's stdin holds at most 64 MiB).
inline constexpr std::size_t box_max_content = 64u << 20;

/// The node's first step (`--sky-launch box-key`): makes a private directory
/// /tmp/sky-box-<random> (0700, created fresh: never one that was there), a fresh key in it
/// (`key`, 0600) and prints one line "sky-box <directory> x25519:<public key>". Returns the
/// exit status.
int box_key_main(const std::vector<std::string>& args);
/// The node's second step (`--sky-launch unbox DIR NAME MODE`): checks that DIR is this user's
/// own 0700 directory (not a link), reads its key and removes it, opens the box on stdin and
/// writes the content to DIR/NAME (a new file, then given the octal MODE). Nothing is written
/// unless the whole box opened. Returns the exit status (errors on stderr, never the content).
int unbox_main(const std::vector<std::string>& args);

}  // namespace sky::detail
