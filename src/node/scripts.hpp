#pragma once
// Node-side scripts are .sh files embedded at build time (sky_embed_scripts, src/CMakeLists.txt);
// what differs from one pool or image to the next reaches them as values: variable assignments
// written in front of the script's text (ScriptValues), never code formatted into it. Shell
// functions that more than one script uses have one copy each here.
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail::scripts {

/// dir_is_ours.sh: `sky_dir_is_ours DIR` is true when nobody but root and the user can change
/// what is in DIR; otherwise it prints why and fails.
std::string_view dir_is_ours_sh();

/// The values a script reads, as bash assignments: each value a single-quoted word, an array
/// of them, or a text as it is (a quoted here-document: readable, nothing in it expanded).
class ScriptValues {
public:
    /// Starts the script: "#!/usr/bin/env bash" and `title` as a comment.
    explicit ScriptValues(std::string_view title);
    /// name='value'
    ScriptValues& word(std::string_view name, std::string_view value);
    /// name=N
    ScriptValues& number(std::string_view name, long long value);
    /// name=('a' 'b' ...)
    ScriptValues& words(std::string_view name, const std::vector<std::string>& values);
    /// name set to `text` (without a last newline) by a here-document whose end line is `end`
    /// (with '_' appended until no line of the text equals it); name='' for an empty text.
    ScriptValues& text(std::string_view name, std::string_view text,
                       std::string_view end = "SKY_END");
    /// The assignments, then a blank line, then each of `parts` (the scripts' text).
    [[nodiscard]] std::string then(const std::vector<std::string_view>& parts) const;

private:
    std::string out_;
};

}  // namespace sky::detail::scripts
