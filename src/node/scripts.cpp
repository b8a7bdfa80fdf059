#include "node/scripts.hpp"

#include "util/shell.hpp"

namespace sky::detail::scripts {

namespace {
// True when some line of `text` is exactly `line`.
bool has_line(std::string_view text, std::string_view line) {
    while (!text.empty()) {
        const auto nl = text.find('\n');
        if (text.substr(0, nl) == line) return true;
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
    return false;
}
}  // namespace

ScriptValues::ScriptValues(std::string_view title) {
    out_ = "#!/usr/bin/env bash\n# ";
    out_ += title;
    out_ += '\n';
}

ScriptValues& ScriptValues::word(std::string_view name, std::string_view value) {
    out_.append(name).append("=").append(shell_quote(value)).append("\n");
    return *this;
}

ScriptValues& ScriptValues::number(std::string_view name, long long value) {
    out_.append(name).append("=").append(std::to_string(value)).append("\n");
    return *this;
}

ScriptValues& ScriptValues::words(std::string_view name, const std::vector<std::string>& values) {
    out_.append(name).append("=(");
    for (std::size_t i = 0; i < values.size(); ++i)
        out_.append(i ? " " : "").append(shell_quote(values[i]));
    out_.append(")\n");
    return *this;
}

ScriptValues& ScriptValues::text(std::string_view name, std::string_view text,
                                 std::string_view end_line) {
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    if (text.empty()) return word(name, "");
    std::string end(end_line);
    while (has_line(text, end)) end += "_";
    out_.append(name).append("=$(cat <<'").append(end).append("'\n");
    out_.append(text).append("\n").append(end).append("\n)\n");
    return *this;
}

std::string ScriptValues::then(const std::vector<std::string_view>& parts) const {
    std::string s = out_;
    s += '\n';
    for (const auto p : parts) s += p;
    return s;
}

}  // namespace sky::detail::scripts
