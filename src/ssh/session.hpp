#pragma once
// SSH to a node: one libssh2 session per node carries exec, SFTP uploads and any number of
// direct-tcpip / direct-streamlocal tunnels (the worker connections). Internal to libsky: never
// included by a public header.
//
// Threading: libssh2 sessions are not thread-safe, so every libssh2 call of a session runs on one
// strand of the I/O core (io/io_core.hpp), woken by the session socket's readiness; no session
// and no channel has a thread of its own. The blocking calls (the constructor, exec, upload,
// open_tunnel) hand their work to the strand and wait: they refuse to run on an I/O thread
// (std::logic_error), where the wait could never end. Exec callbacks of the blocking exec run on
// the caller's thread; those of async_exec on the session's strand.
#include <boost/asio/any_completion_handler.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/stream.hpp"
#include "io/transport.hpp"
#include "sky/errors.hpp"

namespace sky::detail::ssh {

/// Base of the SSH layer's errors. Messages name the host, never a key or passphrase.
class SshError : public sky::Error {
public:
    using sky::Error::Error;
};

/// TCP connect or SSH handshake failed (after the configured retries).
class ConnectError : public SshError {
public:
    ConnectError(const std::string& message, bool timed_out)
        : SshError(message), timed_out_(timed_out) {}
    /// True when the last attempt ran out of time (nothing answered).
    [[nodiscard]] bool timed_out() const noexcept { return timed_out_; }

private:
    bool timed_out_;
};

/// The server's host key is not the pinned one: refused before authenticating.
class HostKeyMismatch : public SshError {
public:
    /// `revoked`: the presented key is marked @revoked in known_hosts (said in the message).
    HostKeyMismatch(std::string host, std::vector<std::string> expected, std::string actual,
                    bool revoked = false);
    [[nodiscard]] const std::string& host() const noexcept { return host_; }
    /// The accepted fingerprints ("SHA256:..."); empty when the known_hosts file had no entry.
    [[nodiscard]] const std::vector<std::string>& expected() const noexcept { return expected_; }
    /// The fingerprint the server presented.
    [[nodiscard]] const std::string& actual() const noexcept { return actual_; }

private:
    std::string host_;
    std::vector<std::string> expected_;
    std::string actual_;
};

/// The server refused the key for the user.
class AuthenticationError : public SshError {
public:
    using SshError::SshError;
};

/// The session died (socket closed, sshd gone, protocol error): every pending and later operation
/// on it fails with this error.
class ConnectionLost : public SshError {
public:
    using SshError::SshError;
};

/// One operation failed while the session lives on: a tunnel the server refused to open (nothing
/// listening at the target), an SFTP error, a refused exec.
class ChannelError : public SshError {
public:
    using SshError::SshError;
};

/// Which host keys to accept. Without one of these the connection is refused: there is no
/// trust-on-first-use unless insecure_accept_any() asks for it.
struct HostKeyPin {
    /// Accepted fingerprints, "SHA256:<base64 without padding>" (what `ssh-keygen -l` prints).
    std::vector<std::string> fingerprints;
    /// Or: a known_hosts file; its entries for the host (plain, "[host]:port" or hashed) count.
    std::filesystem::path known_hosts_file;
    /// Accept any key (tests, explicit user opt-in only). The key seen is in
    /// host_key_fingerprint().
    bool accept_any = false;

    static HostKeyPin fingerprint(std::string fp);
    /// From an OpenSSH public key ("ssh-ed25519 AAAA... [comment]") or a known_hosts line.
    static HostKeyPin public_key(std::string_view line);
    static HostKeyPin known_hosts(std::filesystem::path file);
    static HostKeyPin insecure_accept_any();
};

struct SessionOptions {
    std::string host;  ///< address or name
    std::uint16_t port = 22;
    std::string user = "root";
    /// Private key file (OpenSSH format; ed25519 recommended); its ".pub" beside it is used if
    /// present. Alternatively private_key holds the key text (never logged).
    std::filesystem::path private_key_file;
    std::string private_key;
    std::string passphrase;  ///< for an encrypted key; never logged
    HostKeyPin host_key;
    /// Per attempt: TCP connect plus handshake plus authentication.
    std::chrono::milliseconds connect_timeout{10000};
    /// Attempts in all (>= 1); refused/unreachable/timed-out connects are retried.
    int connect_attempts = 3;
    /// Pause before the second attempt; doubles each time, capped at 5 s.
    std::chrono::milliseconds retry_delay{250};
    /// Retry also when the key is refused (a node whose authorized_keys is not written yet).
    bool retry_auth_failure = false;
    /// SSH keepalive interval (0: none). TCP keepalive also bounds how long a dead peer goes
    /// unnoticed: about keepalive_interval * 3.
    std::chrono::seconds keepalive_interval{15};
    /// Algorithm preferences, comma-separated, libssh2 names (empty: sky's defaults).
    std::string ciphers;
    std::string macs;
    /// Receive window of tunnel channels: larger keeps long fat links busy.
    std::uint32_t tunnel_window = 16u << 20;
};

/// Exit status of a remote command. Output is in out/err unless a line callback took it.
struct ExecResult {
    int exit_status = -1;     ///< -1 when killed by a signal
    std::string exit_signal;  ///< "KILL", "TERM", ... when killed by a signal
    std::string out;
    std::string err;
};

/// Called once per line (without its '\n'); a last line without '\n' is delivered too.
using LineCallback = std::function<void(std::string_view line)>;

struct ExecOptions {
    LineCallback on_stdout;  ///< when set, stdout goes here and not into ExecResult::out
    LineCallback on_stderr;
    std::string stdin_data;  ///< written to the command's stdin, then EOF
    /// 0: no limit. On expiry the channel is closed and sky::TimeoutError is thrown.
    std::chrono::milliseconds timeout{0};
    /// Cap of what out/err keep (the tail survives).
    std::size_t capture_limit = 16u << 20;
};

/// How a tunnel's operations fail, as error codes of io::Stream completions (the stream's
/// failure() says why in words). Besides these: asio::error::eof when the far end closed the
/// channel, asio::error::operation_aborted after close().
enum class StreamErrc {
    connection_lost = 1,  ///< the session died or was closed (ConnectionLost)
    channel_failed,       ///< the channel failed while the session lives (ChannelError)
    closed_by_remote,     ///< a write after the far end closed the channel (ChannelError)
};
/// The category of StreamErrc ("sky.ssh").
const boost::system::error_category& stream_category() noexcept;
/// `e` as an error code of stream_category().
boost::system::error_code make_error(StreamErrc e) noexcept;

class Session;

/// Completion of async_connect: the error (ConnectError, HostKeyMismatch, AuthenticationError,
/// SshError) or the session.
using ConnectHandler = boost::asio::any_completion_handler<void(std::exception_ptr, Session)>;
/// Completion of async_exec: the error (ConnectionLost, ChannelError, sky::TimeoutError) or the
/// result.
using ExecHandler = boost::asio::any_completion_handler<void(std::exception_ptr, ExecResult)>;
/// Completion of an asynchronous tunnel open: the error (ChannelError, ConnectionLost,
/// sky::TimeoutError) or the open stream.
using TunnelHandler =
    boost::asio::any_completion_handler<void(std::exception_ptr, std::unique_ptr<io::Stream>)>;

class Session {
public:
    /// Connects, checks the host key, authenticates (a wait on the I/O core). Throws
    /// ConnectError, HostKeyMismatch, AuthenticationError.
    explicit Session(SessionOptions options);
    /// The same without waiting: `handler` gets the session or the error (on its associated
    /// executor, else on the session's strand; never inside this call).
    static void async_connect(SessionOptions options, ConnectHandler handler);
    /// Closes every channel and the connection; tunnels still held fail with ConnectionLost.
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    Session(Session&&) noexcept = default;
    /// Closes this session first.
    Session& operator=(Session&& other) noexcept;

    /// Runs a command through the user's shell; blocks until it exits. Callbacks run on this
    /// thread. Several threads may exec at once on one session.
    ExecResult exec(std::string_view command, const ExecOptions& options = {});
    /// The same without waiting: the callbacks run on the session's strand (they must not
    /// block), `handler` gets the result or the error. The timeout is a timer on the strand.
    void async_exec(std::string command, ExecOptions options, ExecHandler handler);

    /// Uploads a local file to remote_path (created or truncated) via SFTP, then sets its mode.
    void upload(const std::filesystem::path& local_path, const std::string& remote_path,
                int mode = 0644);
    /// Uploads a buffer.
    void upload(std::span<const std::byte> data, const std::string& remote_path, int mode = 0644);
    void upload(std::string_view data, const std::string& remote_path, int mode = 0644);
    /// Fills a buffer with up to n bytes of what to upload; 0 means the end. May throw: the
    /// upload then stops and upload() rethrows (the remote file is left partial).
    using UploadSource = std::function<std::size_t(std::byte* buffer, std::size_t n)>;
    /// Uploads what `read` produces (streamed, about 8 MiB in flight); on_progress gets the
    /// bytes handed over so far. `read` and `on_progress` run on this thread.
    void upload(const UploadSource& read, const std::string& remote_path, int mode = 0644,
                const std::function<void(std::uint64_t)>& on_progress = {});

    /// Opens a direct-tcpip channel to host:port as seen from the server (the worker listens on
    /// 127.0.0.1 of its node) and waits for it. Throws ChannelError when the server refuses
    /// (nothing listening), sky::TimeoutError when no answer came within `timeout`. The stream's
    /// executor is the session's strand; once the session is gone, its operations fail with the
    /// reason (failure()).
    std::unique_ptr<io::Stream> open_tunnel(
        const std::string& host, std::uint16_t port,
        std::chrono::milliseconds timeout = std::chrono::seconds(30));
    /// The same without waiting.
    void async_open_tunnel(const std::string& host, std::uint16_t port,
                           std::chrono::milliseconds timeout, TunnelHandler handler);

    /// Opens a channel to a Unix socket on the server (OpenSSH's direct-streamlocal): only
    /// the SSH user (and root) can reach a socket in a 0700 directory, unlike a TCP port.
    /// Throws ChannelError when the server refuses (no such socket, forwarding disabled).
    std::unique_ptr<io::Stream> open_unix_socket(
        const std::string& path, std::chrono::milliseconds timeout = std::chrono::seconds(30));
    /// The same without waiting.
    void async_open_unix_socket(const std::string& path, std::chrono::milliseconds timeout,
                                TunnelHandler handler);

    /// "SHA256:..." of the key the server presented.
    [[nodiscard]] const std::string& host_key_fingerprint() const;
    /// False once the connection is lost or closed.
    [[nodiscard]] bool alive() const;
    /// "ssh root@10.0.0.2:22"
    [[nodiscard]] std::string describe() const;
    /// Closes the session now (idempotent); later operations throw ConnectionLost. Waits for
    /// the strand to let go of the connection, except on an I/O thread (there it only starts).
    void close() noexcept;

    struct Impl;

private:
    explicit Session(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<Impl> impl_;
};

/// A blocking Transport over a tunnel of this layer (for threads that read and write, such as
/// the tests): its errors are this layer's, ConnectionLost when the session died and
/// ChannelError when the channel failed or the far end closed it.
std::unique_ptr<sky::detail::Transport> blocking_transport(std::unique_ptr<io::Stream> tunnel);

/// "SHA256:<base64>" of an OpenSSH public key line ("type base64 [comment]", a known_hosts line
/// works too). Throws SshError when it does not parse.
std::string fingerprint_of_public_key(std::string_view line);

/// "SHA256:<base64 without padding>" of a raw key blob.
std::string fingerprint_of_blob(std::string_view blob);

}  // namespace sky::detail::ssh
