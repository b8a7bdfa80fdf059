// A node's shell on this machine (node::LocalShell), the marks a node prints and their one
// reader, and the values written in front of a node-side script.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "node/local_shell.hpp"
#include "runtime/node_marks.hpp"
#include "node/scripts.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

namespace {
struct ScratchDir {
    std::string path;
    ScratchDir() {
        char tmpl[] = "/tmp/sky-node-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};
std::string read_all(const std::string& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), {}};
}
}  // namespace

TEST_CASE("LocalShell runs an argv as it is, with stdin, a timeout and line callbacks", "[node]") {
    node::LocalShell shell;
    CHECK_FALSE(shell.home().empty());
    CHECK_FALSE(shell.user().empty());
    CHECK(shell.alive());
    // Each word reaches the program as it is: no shell splits or expands it.
    auto r = shell.run({"printf", "%s|", "a b", "$HOME", "it's"}, 10s);
    CHECK(r.status == 0);
    CHECK(r.out == "a b|$HOME|it's|");
    r = shell.run({"cat"}, 10s, "from stdin\n");
    CHECK(r.out == "from stdin\n");
    r = shell.script("echo out; echo err >&2; exit 3", 10s);
    CHECK(r.status == 3);
    CHECK(r.summary() == "exit status 3: err");
    CHECK(r.last_lines() == std::vector<std::string>{"out", "err"});
    r = shell.run({"sleep", "5"}, 200ms);
    CHECK(r.timed_out);
    CHECK(r.summary() == "it timed out");
    std::vector<std::string> out, err;
    node::RunOptions o{.timeout = 10s};
    o.on_stdout = [&](std::string_view l) { out.emplace_back(l); };
    o.on_stderr = [&](std::string_view l) { err.emplace_back(l); };
    r = shell.run({"bash", "-c", "echo one; echo two; echo e >&2; printf last"}, o);
    CHECK(out == std::vector<std::string>{"one", "two", "last"});
    CHECK(err == std::vector<std::string>{"e"});
    CHECK(r.out.empty());
    CHECK(r.err.empty());
}

TEST_CASE("LocalShell uploads a file with its mode, and refuses to write through a symlink",
          "[node]") {
    node::LocalShell shell;
    ScratchDir d;
    std::uint64_t seen = 0;
    const std::string big(300000, 'x');
    std::size_t at = 0;
    shell.upload(
        [&](std::byte* b, std::size_t n) {
            const std::size_t k = std::min(n, big.size() - at);
            std::memcpy(b, big.data() + at, k);
            at += k;
            return k;
        },
        d.path + "/f", 0640, [&](std::uint64_t done) { seen = done; });
    CHECK(read_all(d.path + "/f") == big);
    CHECK(seen == big.size());
    struct stat st {};
    REQUIRE(::stat((d.path + "/f").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    shell.put("small\n", d.path + "/g", 0600);
    CHECK(read_all(d.path + "/g") == "small\n");
    std::filesystem::create_symlink(d.path + "/g", d.path + "/link");
    CHECK_THROWS_AS(shell.put("no", d.path + "/link", 0600), sky::Error);
    CHECK(read_all(d.path + "/g") == "small\n");
}

TEST_CASE("marks: a line is a mark with a value, a bare mark, or not a mark", "[node]") {
    CHECK(node::marks::phase.line("pip") == "::sky-phase pip");
    CHECK(node::marks::idle.line() == "::sky-idle");
    CHECK(node::marks::phase.value_in("::sky-phase pip") == std::optional<std::string_view>("pip"));
    CHECK_FALSE(node::marks::phase.value_in("::sky-phase"));
    CHECK_FALSE(node::marks::phase.value_in("::sky-phasex y"));
    CHECK_FALSE(node::marks::phase.value_in("say ::sky-phase pip"));
    CHECK(node::marks::idle.is("::sky-idle"));
    CHECK_FALSE(node::marks::idle.is("::sky-idle "));
    // One mark that begins like another is not it.
    CHECK_FALSE(node::marks::python.value_in("::sky-python-missing"));
    CHECK(node::marks::python.value_in("::sky-python /usr/bin/python3"));
    CHECK(node::is_mark("::sky-exit 0"));
    CHECK(node::is_mark("::sky-volumes-mounted"));
    CHECK_FALSE(node::is_mark("a line of the user's"));
}

TEST_CASE("PhaseReader: phases move on, other lines are the tail", "[node]") {
    std::vector<std::string> phases;
    node::PhaseReader r([&](const std::string& p) { phases.push_back(p); }, "bootstrap", 2);
    CHECK(r.phase() == "bootstrap");
    r.text("::sky-phase apt\nline 1\nline 2\n::sky-phase pip\nline 3");
    CHECK(phases == std::vector<std::string>{"apt", "pip"});
    CHECK(r.phase() == "pip");
    CHECK(r.tail() == std::vector<std::string>{"line 2", "line 3"});
}

TEST_CASE("ScriptValues: words, arrays and texts reach bash as they are", "[node]") {
    ScratchDir d;
    scripts::ScriptValues v("a test");
    v.word("w", "it's $HOME `x`")
        .number("n", 42)
        .words("a", {"one", "two words", "'"})
        .words("empty", {})
        .text("t", "line $1\nSKY_END\n`date`\n")
        .text("none", "");
    const std::string script = v.then(
        {"printf '%s|%s|%s|%s|%s|%s\\n' \"$w\" \"$n\" \"${a[1]}\" \"${a[2]}\" \"${#empty[@]}\" "
         "\"$none\" > \"$1/out\"\nprintf '%s' \"$t\" > \"$1/t\"\n"});
    std::ofstream(d.path + "/s.sh") << script;
    REQUIRE(std::system(("bash " + d.path + "/s.sh " + d.path).c_str()) == 0);
    CHECK(read_all(d.path + "/out") == "it's $HOME `x`|42|two words|'|0|\n");
    CHECK(read_all(d.path + "/t") == "line $1\nSKY_END\n`date`");
}
