#pragma once
// The channel protocol of the API server's streaming subresources (exec, attach, portforward)
// over WebSocket: every binary message is one channel byte and data. `v4.channel.k8s.io`: 0
// stdin, 1 stdout, 2 stderr, 3 status (a metav1.Status JSON: Success, or a NonZeroExitCode
// failure carrying the code), 4 resize (a JSON {Width, Height}). `v5.channel.k8s.io` adds 255:
// close a stream (its data is the channel closed), the only way to end a process's stdin; v4
// has none, so an upload through v4 must be length-delimited on the far side. Port-forward
// (v4 only) carries each port on two channels, data (2i) and error (2i+1), and the first
// message the server sends on each starts with the port as two bytes, little-endian.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail::kubernetes {

/// The subprotocols, in the order a client offers them (newest first).
inline constexpr const char* kChannelV5 = "v5.channel.k8s.io";
inline constexpr const char* kChannelV4 = "v4.channel.k8s.io";

/// The channels of exec (and of v5's close message).
enum class ExecChannel : std::uint8_t {
    stdin_data = 0,
    stdout_data = 1,
    stderr_data = 2,
    status = 3,
    resize = 4,
    close = 255,  ///< v5 only
};

/// One message: channel byte then data.
[[nodiscard]] std::string encode_frame(std::uint8_t channel, std::string_view data);

/// v5's close of `channel` (255, channel).
[[nodiscard]] std::string encode_close(std::uint8_t channel);

/// A resize message for a terminal of `width` x `height` cells.
[[nodiscard]] std::string encode_resize(unsigned width, unsigned height);

/// A received message split: its channel and data. None for an empty message (no channel
/// byte), which no server sends on purpose.
struct Frame {
    std::uint8_t channel = 0;
    std::string_view data;
};
[[nodiscard]] std::optional<Frame> decode_frame(std::string_view message);

/// What the status channel said about the process.
struct ExecStatus {
    bool exited = false;  ///< the process ran and ended: exit_code is its status
    int exit_code = -1;
    std::string message;  ///< the Status's message when it did not run (or failed otherwise)
};

/// Parses a status-channel message (metav1.Status JSON): Success is exit code 0; a Failure
/// with reason NonZeroExitCode takes the code from details.causes[reason=ExitCode].message;
/// any other Failure (the command was not found, the container is gone) keeps its message.
/// A message that is not a Status is a failure saying so.
[[nodiscard]] ExecStatus parse_exec_status(std::string_view json);

/// Port-forward's receiving side of one channel: the first two bytes the server sends are the
/// port, the rest is data. Feed every message's data of the channel in order.
class PortHeader {
public:
    /// The data of `piece` beyond the port header (empty while the header is incomplete).
    std::string_view strip(std::string_view piece);
    /// The port once both bytes came.
    [[nodiscard]] std::optional<std::uint16_t> port() const {
        return have_ == 2 ? std::optional<std::uint16_t>(port_) : std::nullopt;
    }

private:
    int have_ = 0;
    std::uint16_t port_ = 0;
};

/// The exec subresource's path and query: one command= per argv element, each encoded;
/// `container` empty for the pod's only one; stdin=true when `with_stdin`.
[[nodiscard]] std::string exec_path(const std::string& base_path, const std::string& ns,
                                    const std::string& pod, const std::string& container,
                                    const std::vector<std::string>& argv, bool with_stdin);

/// The portforward subresource's path and query for one port.
[[nodiscard]] std::string portforward_path(const std::string& base_path, const std::string& ns,
                                           const std::string& pod, std::uint16_t port);

}  // namespace sky::detail::kubernetes
