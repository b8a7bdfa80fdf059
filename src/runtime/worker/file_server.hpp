#pragma once
// The node-to-node half of program shipping. A node that holds every file of the program serves
// them to the pool's other nodes over the pool's private network, so the client's uplink carries
// each file once whatever the node count. The server is the program itself, started on a node
// with `--sky-serve-files` (its libraries are in place there by then); receivers need nothing
// but bash (/dev/tcp), head, sha256sum and mv.
//
// Protocol, one file per connection: the receiver sends "<transfer token> <sha256 hex>\n"; the
// server answers with the file's bytes and closes, or closes at once when the token is wrong or
// the file is not one of this pool's. The receiver reads no more than the file's size and checks
// the hash of what arrived, so a wrong or truncated answer is never used.
//
// Bounds: the server listens on the pool's peer address only; a request must arrive within 2 s,
// and at most 4 connections of one address and 64 in all wait for theirs (a newcomer takes the
// oldest one's place: connections without the token cannot keep a receiver out); a reader that
// takes nothing for 30 s, or a transfer longer than 20 minutes, is dropped; at most 64
// transfers at once. Only a request with the token counts as activity for the idle exit,
// and the server ends with its pool whatever happens: when its run directory is removed (the
// pool's stop, or the node's watchdog) and at the pool's hard timeout.
namespace sky::detail {

/// The command-line flag that makes sky::init serve files instead of running the program.
inline constexpr const char* serve_files_flag = "--sky-serve-files";

/// Runs the server from its environment: SKY_SERVE_DIR (the content-addressed store),
/// SKY_SERVE_TOKEN_FILE (read, then removed), SKY_SERVE_LIST_FILE (the hashes it may serve, one
/// a line; read, then removed), SKY_SERVE_PORT_FILE (written once listening), SKY_SERVE_ADDR
/// (the IPv4 address or host name to listen on; empty: every address), SKY_SERVE_RUN_DIR (the
/// server exits once it is gone), SKY_SERVE_LIFETIME (seconds until it exits regardless) and
/// SKY_SERVE_IDLE (seconds without an authenticated request before it exits). Returns the exit
/// status.
int serve_files_main();

}  // namespace sky::detail
