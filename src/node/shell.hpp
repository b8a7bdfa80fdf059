#pragma once
// How sky reaches a node to bring it up: a shell there. The bring-up (shipping the program,
// the image's bootstrap, volumes, the worker's launch and its exit reason) is written once over
// this interface; each way of reaching a machine implements it: an SSH session
// (node/ssh_shell.hpp), a Slurm compute node through its login node's shell and srun
// (node/srun_shell.hpp), this machine (node/local_shell.hpp). A pod reached through an API
// server's exec and port-forward is the same five things: run, upload, home, open a channel,
// reconnect.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/stream.hpp"
#include "sky/errors.hpp"

namespace sky::detail::node {

/// The node's side answered that nothing listens where open_channel() asked to go: the far end is
/// gone, and asking again cannot bring it back.
class ChannelRefused : public sky::Error {
public:
    using sky::Error::Error;
};

/// A command's end: exit status (-1: killed or not started), its two streams.
struct CommandOutcome {
    int status = -1;
    std::string out;  ///< stdout, unless RunOptions::on_stdout took it
    std::string err;  ///< stderr, unless RunOptions::on_stderr took it
    bool timed_out = false;
    /// "exit status 1: <the last line of stderr>" for an error message.
    [[nodiscard]] std::string summary() const;
    /// The last `n` lines of stdout and then stderr, for an error's output.
    [[nodiscard]] std::vector<std::string> last_lines(std::size_t n = 20) const;
};

/// Called once per line of output (without its '\n'); a last line without '\n' is delivered too.
using LineCallback = std::function<void(std::string_view line)>;

/// How to run one command, beyond its argv.
struct RunOptions {
    /// At most this long (0: no limit); then the command is ended and the outcome says
    /// timed_out.
    std::chrono::milliseconds timeout{std::chrono::seconds(30)};
    std::string_view stdin_data;  ///< written to its stdin, then end of file
    LineCallback on_stdout;       ///< when set, stdout goes here and not into the outcome
    LineCallback on_stderr;       ///< when set, stderr goes here and not into the outcome
};

/// Fills a buffer with up to n bytes of a file to upload; 0 means the end. May throw: the upload
/// then stops and upload() rethrows (the file there is left partial).
using ByteSource = std::function<std::size_t(std::byte* buffer, std::size_t n)>;

class NodeShell {
public:
    virtual ~NodeShell() = default;
    NodeShell() = default;
    NodeShell(const NodeShell&) = delete;
    NodeShell& operator=(const NodeShell&) = delete;

    /// Runs argv there (each word reaches the program as it is: no shell of the node splits or
    /// expands it). A failing command is an outcome, not an exception; a lost connection to the
    /// node throws (the implementation's error, a sky::Error).
    virtual CommandOutcome run(const std::vector<std::string>& argv, const RunOptions& options) = 0;
    /// run() with a timeout and stdin.
    CommandOutcome run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                       std::string_view stdin_data = {}) {
        return run(argv, RunOptions{.timeout = timeout, .stdin_data = stdin_data});
    }
    /// Runs a bash script there (`bash -c body`).
    CommandOutcome script(const std::string& body, std::chrono::milliseconds timeout,
                          std::string_view stdin_data = {}) {
        return run({"bash", "-c", body}, timeout, stdin_data);
    }
    /// Writes what `read` produces to `path` there (created or truncated, then given `mode`);
    /// `progress` sees the bytes handed over so far. Throws sky::Error when it cannot.
    virtual void upload(const ByteSource& read, const std::string& path, int mode,
                        const std::function<void(std::uint64_t)>& progress = {}) = 0;
    /// upload() of a small buffer.
    void put(std::string_view content, const std::string& path, int mode);
    /// $HOME there.
    [[nodiscard]] virtual const std::string& home() const = 0;
    /// The user commands run as there.
    [[nodiscard]] virtual const std::string& user() const = 0;
    /// A byte stream to host:port as the node's side reaches it, within `timeout`. Throws
    /// ChannelRefused when the far side answers that nothing listens there, another sky::Error
    /// when nothing answers.
    virtual std::unique_ptr<io::Stream> open_channel(
        const std::string& host, std::uint16_t port,
        std::chrono::milliseconds timeout = std::chrono::seconds(30)) = 0;
    /// A byte stream to the Unix socket at `path` on the node, within `timeout`, where the shell
    /// can reach one (an SSH session's direct-streamlocal channel, this machine). Throws
    /// ChannelRefused when nothing listens there, std::logic_error where the shell reaches no
    /// Unix socket (a bring-up there listens on a TCP port: BringUpOptions::listen_host).
    virtual std::unique_ptr<io::Stream> open_unix_socket(
        const std::string& path, std::chrono::milliseconds timeout = std::chrono::seconds(30));
    /// After the connection was lost: a new one (one attempt, within `within`), which later
    /// commands and channels use. True when it made one; false when the connection was alive
    /// (another caller reconnected first) or there is none to lose (this machine). Throws when
    /// the node cannot be reached, sky::Error after close().
    virtual bool reconnect(std::chrono::milliseconds within) {
        (void)within;
        return false;
    }
    /// Which connection is in use: a new number after each reconnect().
    [[nodiscard]] virtual std::uint64_t connection() const { return 0; }
    /// Ends connection `connection` when it is still the one in use: it looks alive but does
    /// not answer (half-open), and the next reconnect() replaces it. Never throws.
    virtual void drop(std::uint64_t connection) noexcept { (void)connection; }
    /// Starts argv there on a channel of the connection in use that stays open until the
    /// command ends or the connection does (its output is discarded); returns at once. The
    /// command learns that the connection is gone when its writes to stdout fail: a watchdog of
    /// the client's connection, whatever the far side's sshd calls its processes. Throws
    /// std::logic_error where there is no connection to hold (this machine).
    virtual void hold(const std::vector<std::string>& argv);
    /// "root@10.0.0.1:22", "this machine".
    [[nodiscard]] virtual std::string describe() const = 0;
    /// False once the connection is lost.
    [[nodiscard]] virtual bool alive() const = 0;
    /// Ends the connection (idempotent). Never throws.
    virtual void close() noexcept = 0;
};

/// `argv` as one command line of a POSIX shell: each word single-quoted.
[[nodiscard]] std::string shell_command(const std::vector<std::string>& argv);

}  // namespace sky::detail::node
