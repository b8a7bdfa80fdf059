#include "providers/kubernetes/channel.hpp"

#include <charconv>
#include <nlohmann/json.hpp>

#include "util/encoding.hpp"

namespace sky::detail::kubernetes {

std::string encode_frame(std::uint8_t channel, std::string_view data) {
    std::string out;
    out.reserve(data.size() + 1);
    out.push_back(static_cast<char>(channel));
    out.append(data);
    return out;
}

std::string encode_close(std::uint8_t channel) {
    return std::string{static_cast<char>(ExecChannel::close), static_cast<char>(channel)};
}

std::string encode_resize(unsigned width, unsigned height) {
    const nlohmann::json size = {{"Width", width}, {"Height", height}};
    return encode_frame(static_cast<std::uint8_t>(ExecChannel::resize), size.dump());
}

std::optional<Frame> decode_frame(std::string_view message) {
    if (message.empty()) return std::nullopt;
    return Frame{static_cast<std::uint8_t>(message[0]), message.substr(1)};
}

ExecStatus parse_exec_status(std::string_view json) {
    ExecStatus s;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json);
    } catch (const nlohmann::json::exception&) {
        s.message = "the status channel carried something that is not a Status";
        return s;
    }
    if (!j.is_object()) {
        s.message = "the status channel carried something that is not a Status";
        return s;
    }
    const std::string status = j.value("status", "");
    if (status == "Success") {
        s.exited = true;
        s.exit_code = 0;
        return s;
    }
    s.message = j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>()
                                                                  : "exec failed (" + status + ")";
    if (j.value("reason", "") == "NonZeroExitCode" && j.contains("details") &&
        j["details"].is_object() && j["details"].contains("causes") &&
        j["details"]["causes"].is_array()) {
        for (const auto& c : j["details"]["causes"]) {
            if (!c.is_object() || c.value("reason", "") != "ExitCode") continue;
            const std::string m = c.value("message", "");
            int code = -1;
            const auto [end, ec] = std::from_chars(m.data(), m.data() + m.size(), code);
            if (ec == std::errc() && end == m.data() + m.size() && code >= 0) {
                s.exited = true;
                s.exit_code = code;
                s.message.clear();
            }
            break;
        }
    }
    return s;
}

std::string_view PortHeader::strip(std::string_view piece) {
    while (have_ < 2 && !piece.empty()) {
        port_ |= static_cast<std::uint16_t>(static_cast<unsigned char>(piece[0]) << (8 * have_));
        ++have_;
        piece.remove_prefix(1);
    }
    return have_ < 2 ? std::string_view() : piece;
}

std::string exec_path(const std::string& base_path, const std::string& ns, const std::string& pod,
                      const std::string& container, const std::vector<std::string>& argv,
                      bool with_stdin) {
    std::string q =
        base_path + "/api/v1/namespaces/" + url_encode(ns) + "/pods/" + url_encode(pod) + "/exec?";
    for (const auto& a : argv) q += "command=" + url_encode(a) + "&";
    if (!container.empty()) q += "container=" + url_encode(container) + "&";
    if (with_stdin) q += "stdin=true&";
    q += "stdout=true&stderr=true";
    return q;
}

std::string portforward_path(const std::string& base_path, const std::string& ns,
                             const std::string& pod, std::uint16_t port) {
    return base_path + "/api/v1/namespaces/" + url_encode(ns) + "/pods/" + url_encode(pod) +
           "/portforward?ports=" + std::to_string(port);
}

}  // namespace sky::detail::kubernetes
