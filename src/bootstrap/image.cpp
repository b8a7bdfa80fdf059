// sky::Image: the content hash and the idempotent bootstrap script.
#include "sky/image.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <string>

#include "bootstrap/pip.hpp"
#include "bootstrap/scripts.hpp"
#include "runtime/node_marks.hpp"
#include "node/scripts.hpp"
#include "sky/errors.hpp"
#include "util/digest.hpp"
#include "util/encoding.hpp"
#include "util/shell.hpp"

namespace sky::inline v0 {

namespace {

using detail::base64_encode;
using detail::sha256_hex;
using detail::shell_quote;

// Length-prefixed fields: no two different images serialize the same.
void field(std::string& out, const std::string& s) { out += fmt::format("{}:{};", s.size(), s); }

}  // namespace

std::string Image::content_hash() const {
    std::string c = "sky-image-v1;";
    field(c, python);
    c += fmt::format("pip{};", pip.size());
    for (auto& p : pip) field(c, p);
    field(c, pip_extra_index_url.value_or(""));
    c += fmt::format("apt{};", apt.size());
    for (auto& p : apt) field(c, p);
    c += fmt::format("env{};", env.size());
    for (auto& [k, v] : env) {
        field(c, k);
        field(c, v);
    }
    c += fmt::format("setup{};", setup.size());
    for (auto& s : setup) field(c, s);
    c += fmt::format("files{};", files.size());
    for (auto& f : files) {
        field(c, f.path);
        field(c, f.content);
        c += fmt::format("{:o};", f.mode);
    }
    return sha256_hex(c).substr(0, 12);
}

void Image::validate() const {
    static const std::regex pkg(R"([a-z0-9][a-z0-9+.\-]*(=[A-Za-z0-9.+:~\-]+)?)");
    static const std::regex name(R"([A-Za-z_][A-Za-z0-9_]*)");
    static const std::regex pyver(R"(3(\.[0-9]+){0,2})");
    for (auto& p : apt)
        if (!std::regex_match(p, pkg))
            throw ConfigError(fmt::format("image.apt: \"{}\" is not a Debian package name", p));
    for (auto& p : pip)
        if (p.empty() || p.find_first_of("\n\r") != std::string::npos)
            throw ConfigError(fmt::format("image.pip: \"{}\" is not a pip requirement", p));
    if (pip_extra_index_url && std::any_of(pip_extra_index_url->begin(), pip_extra_index_url->end(),
                                           [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
        throw ConfigError(
            "image.pip_extra_index_url: the URL has a control character (line break, tab)");
    if (!python.empty() && !std::regex_match(python, pyver))
        throw ConfigError(fmt::format("image.python: \"{}\" is not a Python 3 version", python));
    for (auto& [k, v] : env)
        if (!std::regex_match(k, name))
            throw ConfigError(fmt::format("image.env: \"{}\" is not a variable name", k));
    for (auto& f : files)
        if (f.path.empty() || f.path[0] != '/')
            throw ConfigError(fmt::format("image.files: \"{}\" is not an absolute path", f.path));
}

std::string Image::bootstrap(std::chrono::seconds ttl) const {
    // The image's values, readable (every package by its name), then the steps every image
    // runs (image.sh). No value is ever a word of a command line: builtins write them into
    // private files.
    const detail::PipFiles pipf = detail::pip_files(*this);
    std::string exports, commands;
    for (auto& [k, v] : env) exports += "export " + k + "=" + shell_quote(v) + "\n";
    for (auto& c : setup) commands += c + "\n";
    std::vector<std::string> paths, modes, data;
    for (auto& f : files) {
        paths.push_back(f.path);
        modes.push_back(fmt::format("{:o}", f.mode));
        data.push_back(base64_encode(f.content));
    }
    const bool venv = !python.empty() || !pip.empty();
    detail::scripts::ScriptValues v(fmt::format(
        "sky bootstrap for image {} (idempotent: safe to run again). What the image asks for:",
        content_hash()));
    v.word("sky_phase_mark", detail::node::marks::phase.text)
        .words("sky_apt", apt)
        .word("sky_python", !venv            ? ""
                            : python.empty() ? "python3"
                                             : "python" + python)
        .text("sky_pip_requirements", pip.empty() ? "" : pipf.requirements)
        .word("sky_pip_extra_index_url", pip.empty() ? "" : pipf.extra_index_url)
        // The index URL's credentials: the one value written encoded, so that the script
        // shows no token to whoever reads it over a shoulder; base64 -d <<< turns it back.
        .word("sky_pip_netrc", pip.empty() || pipf.netrc.empty() ? "" : base64_encode(pipf.netrc))
        .text("sky_env", exports)
        .words("sky_file_path", paths)
        .words("sky_file_mode", modes)
        .words("sky_file_data", data)
        .text("sky_setup", commands)
        .number("sky_ttl", std::max<long long>(0, ttl.count()));
    return v.then({detail::scripts::dir_is_ours_sh(), detail::scripts::image_sh()});
}

}  // namespace sky::inline v0
