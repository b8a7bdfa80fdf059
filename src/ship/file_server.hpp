#pragma once
// The node-to-node half of program shipping. A node that holds every file of the program serves
// them to the pool's other nodes over the pool's private network, so the client's uplink carries
// each file once whatever the node count. The server is the program itself, started on a node
// with `--sky-serve-files` (its libraries are in place there by then); receivers need nothing
// but bash (/dev/tcp), sha256sum and mv.
//
// Protocol, one file per connection: the receiver sends "<transfer token> <sha256 hex>\n"; the
// server answers with the file's bytes and closes, or closes at once when the token is wrong or
// it has no such file. The receiver checks the hash of what arrived, so a wrong or truncated
// answer is never used.
namespace sky::detail::ship {

/// The command-line flag that makes sky::init serve files instead of running the program.
inline constexpr const char* serve_files_flag = "--sky-serve-files";

/// Runs the server from its environment: SKY_SERVE_DIR (the content-addressed store),
/// SKY_SERVE_TOKEN_FILE (read, then removed), SKY_SERVE_PORT_FILE (written once listening),
/// SKY_SERVE_IDLE (seconds without a request before it exits). Returns the exit status.
int serve_files_main();

}  // namespace sky::detail::ship
