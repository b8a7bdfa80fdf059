#pragma once
// The lines a program running on a node prints to tell the client something: "::sky-<name>",
// maybe followed by a space and a value ("::sky-phase pip", "::sky-port 40123"). Every mark is
// defined here, once; shell that prints one gets it from here (a format argument, a function
// argument or the environment), and every reader parses lines with the functions below.
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail::node {

/// One mark: its text, "::sky-<name>".
struct Mark {
    std::string_view text;
    /// The line that carries `value` ("<text> <value>"), or the bare mark for an empty value.
    [[nodiscard]] std::string line(std::string_view value = {}) const;
    /// True when `l` is exactly the mark (no value).
    [[nodiscard]] bool is(std::string_view l) const { return l == text; }
    /// The value when `l` is this mark followed by a space and a value; nullopt otherwise. The
    /// view is into `l`: keep the line alive while it is used (never pass a temporary).
    [[nodiscard]] std::optional<std::string_view> value_in(std::string_view l) const;
};

namespace marks {
// The image's bootstrap script (bootstrap/image.cpp): the phase that begins ("env", "pip" ...).
inline constexpr Mark phase{"::sky-phase"};
// A worker's launcher: the port its worker listens on, the worker's exit status, and why the
// launcher released a Slurm job (its client silent: idle; a newer step took its place:
// superseded <job.step>).
inline constexpr Mark port{"::sky-port"};
inline constexpr Mark exit{"::sky-exit"};
inline constexpr Mark idle{"::sky-idle"};
inline constexpr Mark superseded{"::sky-superseded"};
// Slurm's placement: a compute node's facts ("<name> <arch> <glibc> <nonce> <cached> <home>"),
// and a node where the program arrived by sbcast ("<name>").
inline constexpr Mark probe{"::sky-probe"};
inline constexpr Mark placed{"::sky-placed"};
// Slurm's private directory for sbcast: made on a node ("<name>"), or refused there ("<name>
// <why>": it exists and is not this user's own).
inline constexpr Mark incoming{"::sky-incoming"};
inline constexpr Mark refused{"::sky-refused"};
// Volumes' mount script: which volume failed and why ("<index|-> <reason>"), all mounted.
inline constexpr Mark volume_failed{"::sky-volume-failed"};
inline constexpr Mark volumes_mounted{"::sky-volumes-mounted"};
// Local's image checks on this machine: no dpkg to ask, an apt package missing ("<name>"), the
// python asked for is missing, none at all, the one used ("<path>").
inline constexpr Mark no_dpkg{"::sky-no-dpkg"};
inline constexpr Mark missing{"::sky-missing"};
inline constexpr Mark python_missing{"::sky-python-missing"};
inline constexpr Mark no_python{"::sky-no-python"};
inline constexpr Mark python{"::sky-python"};
}  // namespace marks

/// True when `l` is any of sky's marks (a line for sky, not for the user's eyes).
[[nodiscard]] bool is_mark(std::string_view l);

/// The one reader of a bootstrap script's output: a phase mark moves the phase on (and is
/// reported to `on_phase`), every other line is kept, the last `keep` of them, for the error
/// that names the phase that failed. Lines may come from two threads (stdout and stderr).
class PhaseReader {
public:
    explicit PhaseReader(std::function<void(const std::string& phase)> on_phase,
                         std::string first_phase = "bootstrap", std::size_t keep = 20);
    /// One line of output.
    void line(std::string_view l);
    /// Every line of `text`.
    void text(std::string_view text);
    /// The phase that runs (or ran last).
    [[nodiscard]] std::string phase() const;
    /// The last lines that were not marks.
    [[nodiscard]] std::vector<std::string> tail() const;

private:
    std::function<void(const std::string&)> on_phase_;
    std::size_t keep_;
    mutable std::mutex m_;
    std::string phase_;
    std::deque<std::string> tail_;
};

}  // namespace sky::detail::node
