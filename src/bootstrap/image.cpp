// sky::Image: the content hash and the idempotent bootstrap script.
#include "sky/image.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <string>

#include "bootstrap/pip.hpp"
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
    std::string s;
    s += "#!/usr/bin/env bash\n";
    s += fmt::format("# sky bootstrap for image {} (idempotent: safe to run again)\n",
                     content_hash());
    s += "set -euo pipefail\n";
    // Everything this script creates is the pool user's alone (env.sh holds Image::env, which
    // may carry secrets) unless a step below widens it on purpose.
    s += "umask 077\n";
    s += "export DEBIAN_FRONTEND=noninteractive\n";
    s += "SKY_HOME=${SKY_HOME:-/opt/sky}\n";
    s += "mkdir -p \"$SKY_HOME\"\n";
    s += "chmod 700 \"$SKY_HOME\"\n";
    s += "phase() { echo \"::sky-phase $1\"; }\n";
    s += "SUDO=; [ \"$(id -u)\" -eq 0 ] || SUDO=sudo\n";
    if (!apt.empty()) {
        s += "phase apt\n";
        s += "missing=()\n";
        s += "for p in";
        for (auto& p : apt) s += " " + shell_quote(p);
        s += "; do dpkg-query -W -f='${Status}' \"${p%%=*}\" 2>/dev/null | grep -q 'install ok "
             "installed' || missing+=(\"$p\"); done\n";
        // apt and the packages' maintainer scripts expect the usual umask (lists and files
        // they create must stay readable by other users and services).
        s += "if [ ${#missing[@]} -gt 0 ]; then (\n";
        s += "  umask 022\n";
        s += "  $SUDO apt-get update -qq\n";
        s += "  $SUDO apt-get install -y -qq --no-install-recommends \"${missing[@]}\"\n";
        s += ") fi\n";
    }
    if (!python.empty() || !pip.empty()) {
        s += "phase python\n";
        std::string py = python.empty() ? "python3" : "python" + python;
        s += fmt::format("PY=$(command -v {} || command -v python3)\n", shell_quote(py));
        s += "[ -x \"$SKY_HOME/venv/bin/python\" ] || \"$PY\" -m venv \"$SKY_HOME/venv\"\n";
        if (!pip.empty()) {
            s += "phase pip\n";
            // The requirements and the index URL's credentials reach pip through private
            // files, the URL through its environment (bootstrap/pip.hpp), never its argument
            // list; written with builtins (here-strings), removed when pip is done or the
            // script fails.
            const detail::PipFiles files = detail::pip_files(*this);
            s += "pip_dir=$(mktemp -d \"$SKY_HOME/pip.XXXXXX\")\n";
            s += "trap 'rm -rf \"$pip_dir\"' EXIT\n";
            s += fmt::format("base64 -d <<< {} > \"$pip_dir/requirements.txt\"\n",
                             shell_quote(base64_encode(files.requirements)));
            std::string env;
            if (!files.extra_index_url.empty())
                env += "PIP_EXTRA_INDEX_URL=" + shell_quote(files.extra_index_url) + " ";
            if (!files.netrc.empty()) {
                s += fmt::format(
                    "{{ cat \"$HOME/.netrc\" 2>/dev/null || true; echo; base64 -d <<< {}; }} > "
                    "\"$pip_dir/netrc\"\n",
                    shell_quote(base64_encode(files.netrc)));
                env += "NETRC=\"$pip_dir/netrc\" ";
            }
            s += env +
                 "\"$SKY_HOME/venv/bin/python\" -m pip install -q -r "
                 "\"$pip_dir/requirements.txt\"\n";
            s += "rm -rf \"$pip_dir\"\ntrap - EXIT\n";
        }
    }
    s += "phase env\n";
    // Written aside and renamed: nodes bootstrapping at once never read half a file. mktemp
    // creates it 0600, exclusively: it never reuses or follows what is already there.
    s += "env_tmp=$(mktemp \"$SKY_HOME/env.sh.XXXXXX\")\n";
    s += "chmod 600 \"$env_tmp\"\n";
    if (!python.empty() || !pip.empty()) {
        // The image's venv is active for whatever sources env.sh (the worker, setup commands):
        // its python3 and pip come first on PATH. The image's env below may still set either.
        s += "printf 'export VIRTUAL_ENV=%q\\nexport PATH=%q/bin:\"$PATH\"\\nunset PYTHONHOME\\n' "
             "\"$SKY_HOME/venv\" \"$SKY_HOME/venv\" >> \"$env_tmp\"\n";
    }
    for (auto& [k, v] : env)
        s += fmt::format("echo {} >> \"$env_tmp\"\n",
                         shell_quote("export " + k + "=" + shell_quote(v)));
    s += "mv -f \"$env_tmp\" \"$SKY_HOME/env.sh\"\n";
    if (!files.empty()) {
        s += "phase files\n";
        // Each file is written into a fresh temporary file beside it (mktemp: 0600, created
        // exclusively, so the content is never readable by others on the way and nothing that
        // is already there is reused or followed), given its mode, then renamed over the path
        // (rename replaces a symlink, never writes through it). A directory that every user
        // may write to, without the sticky bit, or that another user owns is refused: someone
        // else could swap the file.
        s += "sky_put() {\n";
        s += "  local dir; dir=$(dirname \"$1\")\n";
        s += "  (umask 022; $SUDO mkdir -p \"$dir\")\n";
        s += "  if [ -n \"$(find \"$dir\" -maxdepth 0 -perm -0002 ! -perm -1000)\" ]; then\n";
        s += "    echo \"sky: refusing to write $1: $dir is writable by every user\" >&2; return "
             "1\n";
        s += "  fi\n";
        // A directory of another (non-root) user's: they could replace the file after it is
        // written (review r4 I1).
        s += "  if [ -n \"$(find \"$dir\" -maxdepth 0 ! -user 0 ! -user \"$(id -u)\")\" ]; then\n";
        s += "    echo \"sky: refusing to write $1: $dir belongs to another user\" >&2; return 1\n";
        s += "  fi\n";
        s += "  local tmp; tmp=$($SUDO mktemp \"$dir/.sky-file.XXXXXX\")\n";
        s += "  if ! base64 -d <<< \"$3\" | $SUDO tee \"$tmp\" > /dev/null ||\n";
        s += "     ! $SUDO chmod \"$2\" \"$tmp\" || ! $SUDO mv -f -T \"$tmp\" \"$1\"; then\n";
        s += "    $SUDO rm -f \"$tmp\"; return 1\n";
        s += "  fi\n";
        s += "}\n";
        for (auto& f : files) {
            s += fmt::format("sky_put {} {:o} {}\n", shell_quote(f.path), f.mode,
                             shell_quote(base64_encode(f.content)));
        }
    }
    if (!setup.empty()) {
        s += "phase setup\n";
        // The user's own commands run with the usual umask, as in a login shell.
        s += "(\n  umask 022\n  . \"$SKY_HOME/env.sh\"\n";
        for (auto& c : setup) s += "  " + c + "\n";
        s += ")\n";
    }
    if (ttl.count() > 0) {
        s += "phase ttl\n";
        s += fmt::format("echo $(( $(date +%s) + {} )) > \"$SKY_HOME/deadline\"\n", ttl.count());
    }
    s += "phase done\n";
    return s;
}

}  // namespace sky::inline v0
