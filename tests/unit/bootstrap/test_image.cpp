// Image: a stable content hash and an idempotent script with phase markers.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include "bootstrap/pip.hpp"
#include "sky/errors.hpp"
#include "sky/image.hpp"

// The bootstrap writes Image::files as root, or through sudo for another user (as on a node).
// Where neither is possible the script cannot run: those tests skip, saying why.
#define SKIP_WITHOUT_ROOT_OR_SUDO()                                                       \
    do {                                                                                  \
        if (::geteuid() != 0 && std::system("sudo -n true > /dev/null 2>&1") != 0) {      \
            WARN("skipped: the bootstrap script needs root or passwordless sudo to run"); \
            return;                                                                       \
        }                                                                                 \
    } while (0)

namespace {
// Removes a scratch directory when the test ends, however it ends.
struct RemoveAll {
    std::string dir;
    ~RemoveAll() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};
}  // namespace

TEST_CASE("content_hash is 12 hex chars, stable, and sensitive to every field", "[image]") {
    sky::Image a{.python = "3.13", .pip = {"numpy"}, .apt = {"ffmpeg"}, .env = {{"K", "v"}}};
    auto h = a.content_hash();
    CHECK(h.size() == 12);
    CHECK(h.find_first_not_of("0123456789abcdef") == std::string::npos);
    // Golden values, computed once (the first 12 hex digits of the SHA-256 of the encoding in
    // src/bootstrap/image.cpp) and written here: nodes of older clients are found by these
    // hashes, so a change of encoding must show up as this test failing, on any machine.
    CHECK(sky::Image{}.content_hash() == "6b2d156f0b60");
    CHECK(h == "424b75288f84");
    // Each field, changed alone, changes the hash.
    std::vector<std::pair<const char*, sky::Image>> changed;
    auto with = [&](const char* what, auto change) {
        sky::Image x = a;
        change(x);
        changed.emplace_back(what, std::move(x));
    };
    with("python", [](sky::Image& x) { x.python = "3.12"; });
    with("pip", [](sky::Image& x) { x.pip.push_back("torch"); });
    with("pip_extra_index_url", [](sky::Image& x) { x.pip_extra_index_url = "https://x/simple"; });
    with("apt", [](sky::Image& x) { x.apt = {"sox"}; });
    with("env value", [](sky::Image& x) { x.env["K"] = "w"; });
    with("env name", [](sky::Image& x) { x.env = {{"L", "v"}}; });
    with("setup", [](sky::Image& x) { x.setup = {"true"}; });
    with("files", [](sky::Image& x) { x.files = {{"/etc/x", "c", 0644}}; });
    std::set<std::string> seen{h};
    for (auto& [what, x] : changed) {
        INFO(what);
        CHECK(x.content_hash() != h);
        seen.insert(x.content_hash());
    }
    CHECK(seen.size() == changed.size() + 1);  // and no two changes collide
    // Each part of a file counts: path, content and mode.
    sky::Image f{.files = {{"/etc/x", "c", 0644}}};
    for (auto change : {sky::File{"/etc/y", "c", 0644}, sky::File{"/etc/x", "d", 0644},
                        sky::File{"/etc/x", "c", 0600}}) {
        sky::Image g{.files = {change}};
        CHECK(g.content_hash() != f.content_hash());
    }
    // Lengths are part of the encoding: moving a boundary between two entries changes it.
    sky::Image c = a;
    c.pip = {"num", "py"};
    sky::Image d = a;
    d.pip = {"nump", "y"};
    CHECK(c.content_hash() != d.content_hash());
}

TEST_CASE("bootstrap reports phases and runs twice without harm", "[image]") {
    SKIP_WITHOUT_ROOT_OR_SUDO();
    sky::Image img{.env = {{"GREETING", "it's \"quoted\" $HOME"}},
                   .setup = {"echo setup-ran >> \"$SKY_HOME/log\""},
                   .files = {{"/tmp/sky-test-image-file.txt", "content\nwith 'quotes'\n", 0600}}};
    auto script = img.bootstrap(60);
    CHECK(script == img.bootstrap(std::chrono::minutes(1)));
    // Run it for real, twice, in a scratch SKY_HOME.
    char tmpl[] = "/tmp/sky-image-test-XXXXXX";
    std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};  // also when an assertion ends the test
    std::string path = dir + "/bootstrap.sh";
    std::ofstream(path) << script;
    std::string cmd = "SKY_HOME=" + dir + " bash " + path + " > " + dir + "/out.txt 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::ifstream out(dir + "/out.txt");
    std::string printed((std::istreambuf_iterator<char>(out)), {});
    for (const char* phase : {"env", "files", "setup", "ttl", "done"})
        CHECK(printed.find(std::string("::sky-phase ") + phase + "\n") != std::string::npos);
    std::ifstream f("/tmp/sky-test-image-file.txt");
    std::string content((std::istreambuf_iterator<char>(f)), {});
    CHECK(content == "content\nwith 'quotes'\n");
    std::string check = "bash -c '. " + dir +
                        "/env.sh && test \"$GREETING\" = \"it'\"'\"'s \\\"quoted\\\" \\$HOME\"'";
    CHECK(std::system(check.c_str()) == 0);
    std::system(("rm -rf " + dir + " /tmp/sky-test-image-file.txt").c_str());
}

TEST_CASE("image validation names the bad value", "[image]") {
    CHECK_THROWS_WITH((sky::Image{.apt = {"rm -rf /"}}.validate()), Catch::Contains("rm -rf /"));
    CHECK_THROWS_WITH((sky::Image{.python = "2.7"}.validate()), Catch::Contains("2.7"));
    CHECK_THROWS_WITH((sky::Image{.files = {{"relative", "x"}}}.validate()),
                      Catch::Contains("relative"));
}

namespace {

// Runs a bootstrap script under `umask 000` (so only the script's own modes count), with
// SKY_HOME=home; returns the exit status and fills `output`.
int run_bootstrap(const std::string& script, const std::string& dir, const std::string& home,
                  std::string& output) {
    std::ofstream(dir + "/bootstrap.sh") << script;
    std::string cmd =
        "umask 000; SKY_HOME=" + home + " bash " + dir + "/bootstrap.sh > " + dir + "/out.txt 2>&1";
    int rc = std::system(cmd.c_str());
    std::ifstream out(dir + "/out.txt");
    output.assign(std::istreambuf_iterator<char>(out), {});
    return rc;
}

unsigned mode_of(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return 07777 + 1;
    return st.st_mode & 07777;
}

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("bootstrap: umask 077, env.sh 0600, SKY_HOME 0700, files written with their mode",
          "[image]") {
    SKIP_WITHOUT_ROOT_OR_SUDO();
    char tmpl[] = "/tmp/sky-image-modes-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};  // also when an assertion ends the test
    const std::string home = dir + "/home";
    sky::Image img{.env = {{"API_TOKEN", "tok-123"}},
                   .setup = {"touch \"$SKY_HOME/from-setup\""},
                   .files = {{dir + "/conf/app.conf", "a=1\n", 0640},
                             {dir + "/conf/secret", "s3cr3t\n", 0600},
                             {dir + "/bin/tool", "#!/bin/sh\n", 0755}}};
    const std::string script = img.bootstrap(0);
    // umask 077 before anything is created.
    CHECK(script.find("umask 077\n") < script.find("mkdir"));
    std::string output;
    REQUIRE(run_bootstrap(script, dir, home, output) == 0);
    INFO(output);
    CHECK(mode_of(home) == 0700);
    CHECK(mode_of(home + "/env.sh") == 0600);
    CHECK(read_all(home + "/env.sh").find("tok-123") != std::string::npos);
    CHECK(mode_of(dir + "/conf/app.conf") == 0640);
    CHECK(mode_of(dir + "/conf/secret") == 0600);
    CHECK(mode_of(dir + "/bin/tool") == 0755);
    CHECK(read_all(dir + "/conf/secret") == "s3cr3t\n");
    // Parent directories get the usual 0755, setup commands the usual umask (022).
    CHECK(mode_of(dir + "/conf") == 0755);
    CHECK(mode_of(home + "/from-setup") == 0644);
    // Nothing left aside: no temporary file of the env or the files phase.
    for (const auto& sub : {home, dir + "/conf", dir + "/bin"}) {
        for (const auto& e : std::filesystem::directory_iterator(sub)) {
            const std::string name = e.path().filename().string();
            CHECK(name.rfind(".sky-file.", 0) == std::string::npos);
            CHECK(name.rfind("env.sh.", 0) == std::string::npos);
        }
    }
    // Run again: same result (idempotent), modes kept.
    REQUIRE(run_bootstrap(script, dir, home, output) == 0);
    CHECK(mode_of(dir + "/conf/secret") == 0600);
    CHECK(mode_of(home + "/env.sh") == 0600);
    std::filesystem::remove_all(dir);
}

TEST_CASE("bootstrap: a file path that is a symlink is replaced, never written through",
          "[image]") {
    SKIP_WITHOUT_ROOT_OR_SUDO();
    char tmpl[] = "/tmp/sky-image-link-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};  // also when an assertion ends the test
    std::ofstream(dir + "/victim") << "original\n";
    std::filesystem::create_symlink(dir + "/victim", dir + "/target");
    sky::Image img{.files = {{dir + "/target", "payload\n", 0644}}};
    std::string output;
    REQUIRE(run_bootstrap(img.bootstrap(0), dir, dir + "/home", output) == 0);
    INFO(output);
    CHECK(read_all(dir + "/victim") == "original\n");
    CHECK_FALSE(std::filesystem::is_symlink(dir + "/target"));
    CHECK(read_all(dir + "/target") == "payload\n");
    CHECK(mode_of(dir + "/target") == 0644);
    std::filesystem::remove_all(dir);
}

TEST_CASE("bootstrap: a directory every user may write to (not sticky) is refused", "[image]") {
    SKIP_WITHOUT_ROOT_OR_SUDO();
    char tmpl[] = "/tmp/sky-image-open-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};  // also when an assertion ends the test
    std::filesystem::create_directory(dir + "/open");
    ::chmod((dir + "/open").c_str(), 0777);
    sky::Image img{.files = {{dir + "/open/f", "x", 0600}}};
    std::string output;
    CHECK(run_bootstrap(img.bootstrap(0), dir, dir + "/home", output) != 0);
    CHECK(output.find("writable by other users") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir + "/open/f"));
    // Sticky (as /tmp is): allowed, other users cannot replace what is ours.
    ::chmod((dir + "/open").c_str(), 01777);
    CHECK(run_bootstrap(img.bootstrap(0), dir, dir + "/home", output) == 0);
    CHECK(mode_of(dir + "/open/f") == 0600);
    std::filesystem::remove_all(dir);
}

TEST_CASE("bootstrap: a directory another user owns is refused (review r4 I1)", "[image]") {
    SKIP_WITHOUT_ROOT_OR_SUDO();
    char tmpl[] = "/tmp/sky-image-theirs-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};  // also when an assertion ends the test
    std::filesystem::create_directory(dir + "/theirs");
    ::chmod((dir + "/theirs").c_str(), 0755);
    REQUIRE(::chown((dir + "/theirs").c_str(), 65534, 65534) == 0);  // nobody's
    sky::Image img{.files = {{dir + "/theirs/f", "x", 0600}}};
    std::string output;
    CHECK(run_bootstrap(img.bootstrap(0), dir, dir + "/home", output) != 0);
    CHECK(output.find("belongs to another user") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir + "/theirs/f"));
    // Root's own directory, or this user's: written.
    REQUIRE(::chown((dir + "/theirs").c_str(), ::geteuid(), ::getegid()) == 0);
    CHECK(run_bootstrap(img.bootstrap(0), dir, dir + "/home", output) == 0);
    CHECK(mode_of(dir + "/theirs/f") == 0600);
}

TEST_CASE("bootstrap: pip gets its requirements and index credentials in files, not arguments",
          "[image][security]") {
    // Review r4 M2: the URL (with a token) and the requirements were pip's arguments.
    const std::string token = "skysecrettoken0123";
    sky::Image img{.pip = {"pkg==1.0", "other>=2"},
                   .pip_extra_index_url = "https://user:" + token + "@pypi.example.com/simple"};
    const std::string script = img.bootstrap(0);
    const auto pip_line = script.find("-m pip install");
    REQUIRE(pip_line != std::string::npos);
    const std::string line =
        script.substr(script.rfind('\n', pip_line) + 1,
                      script.find('\n', pip_line) - script.rfind('\n', pip_line) - 1);
    INFO(line);
    // The command that starts pip: the URL without credentials in its environment, the
    // credentials in a netrc file, the requirements in a file.
    CHECK(line.find(token) == std::string::npos);
    CHECK(line.find("pkg==1.0") == std::string::npos);
    CHECK(line.find("-r \"$pip_dir/requirements.txt\"") != std::string::npos);
    CHECK(script.find("sky_pip_extra_index_url='https://pypi.example.com/simple'\n") !=
          std::string::npos);
    CHECK(script.find("export PIP_EXTRA_INDEX_URL=\"$sky_pip_extra_index_url\"") !=
          std::string::npos);
    CHECK(script.find("export NETRC=\"$pip_dir/netrc\"") != std::string::npos);
    // Nowhere in the script in clear (the netrc entry is written from base64 with builtins).
    CHECK(script.find(token) == std::string::npos);
}

TEST_CASE("bootstrap: the script names every package it installs, in readable text", "[image]") {
    sky::Image img{.pip = {"torch", "numpy"}, .apt = {"libgomp1", "git=1:2.39.5-0+deb12u1"}};
    const std::string script = img.bootstrap(0);
    INFO(script);
    // The pip requirements, one a line, in a quoted here-document (never on a command line).
    CHECK(script.find("\ntorch\nnumpy\n") != std::string::npos);
    CHECK(script.find("sky_apt=('libgomp1' 'git=1:2.39.5-0+deb12u1')\n") != std::string::npos);
    CHECK(script.find("base64 -d <<< 'dG9yY2gKbnVtcHkK'") == std::string::npos);
    // A requirement that looks like the here-document's end does not end it early.
    sky::Image tricky{.pip = {"SKY_END", "numpy"}};
    const std::string t = tricky.bootstrap(0);
    CHECK(t.find("<<'SKY_END_'\nSKY_END\nnumpy\nSKY_END_\n") != std::string::npos);
    // And the script still parses, with the requirements as its value.
    char tmpl[] = "/tmp/sky-image-words-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};
    std::ofstream(dir + "/b.sh") << t.substr(0, t.find("\nset -euo pipefail\n")) +
                                        "\nprintf '%s\\n' \"$sky_pip_requirements\" > " + dir +
                                        "/req\n";
    REQUIRE(std::system(("bash " + dir + "/b.sh").c_str()) == 0);
    CHECK(read_all(dir + "/req") == "SKY_END\nnumpy\n");
}

TEST_CASE("bootstrap: with python or pip, env.sh makes the image's venv active", "[image]") {
    SKIP_WITHOUT_ROOT_OR_SUDO();
    if (std::system("python3 -c 'import venv, ensurepip' > /dev/null 2>&1") != 0) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    char tmpl[] = "/tmp/sky-image-venv-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    RemoveAll cleanup{dir};
    const std::string home = dir + "/home";
    // No package: nothing comes from the network; the venv is still made and activated.
    sky::Image img{.python = "3", .env = {{"SKY_TEST_AFTER", "kept"}}};
    std::string output;
    REQUIRE(run_bootstrap(img.bootstrap(0), dir, home, output) == 0);
    CHECK(output.find("::sky-phase python\n") != std::string::npos);
    const std::string check =
        "bash -c '. " + home + "/env.sh && test \"$VIRTUAL_ENV\" = " + home +
        "/venv && test \"$(command -v python3)\" = " + home +
        "/venv/bin/python3 && test \"$(command -v pip)\" = " + home +
        "/venv/bin/pip && python3 -c \"import sys; assert sys.prefix == \\\"" + home +
        "/venv\\\"\" && test \"$SKY_TEST_AFTER\" = kept'";
    CHECK(std::system(check.c_str()) == 0);
    // Without python or pip there is no venv, and env.sh does not name one.
    sky::Image plain{.env = {{"A", "1"}}};
    const std::string home2 = dir + "/home2";
    REQUIRE(run_bootstrap(plain.bootstrap(0), dir, home2, output) == 0);
    CHECK(read_all(home2 + "/env.sh").find("VIRTUAL_ENV") == std::string::npos);
}

TEST_CASE("pip settings: the index URL's credentials move into a netrc entry",
          "[image][security]") {
    using sky::detail::pip_files;
    auto f = pip_files(sky::Image{
        .pip = {"a", "b==2"}, .pip_extra_index_url = "https://me:p%40ss@host.example:8443/simple"});
    CHECK(f.requirements == "a\nb==2\n");
    CHECK(f.extra_index_url == "https://host.example:8443/simple");
    CHECK(f.netrc == "machine host.example login me password p@ss\n");
    // No credentials: the URL as given, no netrc.
    f = pip_files(sky::Image{.pip = {"a"}, .pip_extra_index_url = "https://host.example/simple"});
    CHECK(f.extra_index_url == "https://host.example/simple");
    CHECK(f.netrc.empty());
    // A token alone (GitHub style) is a login without a password: netrc cannot say that, so the
    // URL keeps it (still only in pip's environment, never an argument).
    f = pip_files(sky::Image{.pip = {"a"}, .pip_extra_index_url = "https://tok@host.example/s"});
    CHECK(f.extra_index_url == "https://tok@host.example/s");
    // Characters a netrc file cannot hold: the URL keeps its credentials.
    f = pip_files(sky::Image{.pip = {"a"}, .pip_extra_index_url = "https://me:a%20b@h.example/s"});
    CHECK(f.extra_index_url == "https://me:a%20b@h.example/s");
    CHECK(f.netrc.empty());
    // No index at all.
    f = pip_files(sky::Image{.pip = {"a"}});
    CHECK(f.extra_index_url.empty());
    CHECK(f.netrc.empty());
    CHECK_THROWS_AS((sky::Image{.pip = {"a"}, .pip_extra_index_url = "https://h/s\n"}.validate()),
                    sky::ConfigError);
}
