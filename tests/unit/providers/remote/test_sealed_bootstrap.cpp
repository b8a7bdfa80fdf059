// A node's bring-up whose shell crosses a network in clear (BringUpOptions::seal, Slurm's step
// I/O): the image's bootstrap script (Image::env, Image::files, pip's index credentials, the
// setup commands) reaches the node only sealed to a key the node made for it
// (runtime/sealed_box.hpp), and a box changed on the way is refused before any of it runs.
// The node is this machine (node::LocalShell) behind a shell that records, and may change,
// every argv and every byte of stdin and of uploads: what a reader of that network would see.
// The node-side program is this test binary (its main is sky::init's).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "node/local_shell.hpp"
#include "providers/remote/bring_up.hpp"
#include "runtime/sealed_box.hpp"
#include "sky/errors.hpp"
#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

using namespace sky::detail;
namespace fs = std::filesystem;

namespace {

// Everything that crosses to the node, and a hook that may change a command's stdin.
class RecordingShell final : public node::NodeShell {
public:
    explicit RecordingShell(node::NodeShell& inner) : inner_(inner) {}
    using NodeShell::run;
    node::CommandOutcome run(const std::vector<std::string>& argv,
                             const node::RunOptions& options) override {
        std::string in(options.stdin_data);
        {
            std::lock_guard lk(m_);
            for (const auto& a : argv) seen_ += a + "\n";
            seen_ += in;
            if (change_stdin && !in.empty()) change_stdin(in);
        }
        node::RunOptions o = options;
        o.stdin_data = in;
        return inner_.run(argv, o);
    }
    void upload(const node::ByteSource& read, const std::string& path, int mode,
                const std::function<void(std::uint64_t)>& progress) override {
        std::string data;
        std::byte buf[1 << 16];
        for (std::size_t n; (n = read(buf, sizeof buf)) > 0;)
            data.append(reinterpret_cast<const char*>(buf), n);
        {
            std::lock_guard lk(m_);
            seen_ += path + "\n" + data;
        }
        inner_.put(data, path, mode);
        if (progress) progress(data.size());
    }
    const std::string& home() const override { return inner_.home(); }
    const std::string& user() const override { return inner_.user(); }
    std::unique_ptr<sky::detail::io::Stream> open_channel(
        const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) override {
        return inner_.open_channel(host, port, timeout);
    }
    std::string describe() const override { return "the recorded test node"; }
    bool alive() const override { return true; }
    void close() noexcept override {}

    std::string seen() {
        std::lock_guard lk(m_);
        return seen_;
    }
    std::function<void(std::string&)> change_stdin;

private:
    node::NodeShell& inner_;
    std::mutex m_;
    std::string seen_;
};

// This test binary's directory, as a provider that placed the program there says it.
std::string program_dir() { return fs::read_symlink("/proc/self/exe").parent_path().string(); }

std::string read_all(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The node's /tmp/sky-box-* directories.
// The box directories a bring-up named to its shell (the unbox command's argument). Only those:
// other tests on this machine make boxes of their own in the same /tmp at the same time.
std::set<std::string> box_dirs_in(const std::string& seen) {
    static const std::regex box("/tmp/sky-box-[0-9a-f]+");
    std::set<std::string> out;
    for (auto it = std::sregex_iterator(seen.begin(), seen.end(), box);
         it != std::sregex_iterator(); ++it)
        out.insert(it->str());
    return out;
}

// None of `dirs` is left.
bool all_gone(const std::set<std::string>& dirs) {
    for (const auto& d : dirs)
        if (fs::exists(d)) return false;
    return true;
}

// A home of the node's own (the image's directory, the run directory) for one test.
struct Scratch {
    fs::path dir;
    Scratch() {
        char tmpl[] = "/tmp/sky-test-sealed-boot-XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        dir = tmpl;
        fs::create_directories(dir / "home");
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

// A LocalShell whose $HOME is `home` (it reads HOME once, when made).
std::unique_ptr<node::LocalShell> shell_at(const fs::path& home) {
    const char* old = std::getenv("HOME");
    const std::string saved = old ? old : "";
    ::setenv("HOME", home.c_str(), 1);
    auto s = std::make_unique<node::LocalShell>();
    if (old)
        ::setenv("HOME", saved.c_str(), 1);
    else
        ::unsetenv("HOME");
    return s;
}

// The forms a secret may take in a script that encodes it: itself, and base64 at each of the
// three offsets a surrounding text may put it at (the characters that depend only on it).
std::vector<std::string> forms_of(const std::string& secret) {
    static constexpr char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<std::string> out{secret};
    for (int k = 0; k < 3; ++k) {
        const std::string in = std::string(static_cast<std::size_t>(k), '\0') + secret;
        std::string b;
        for (std::size_t i = 0; i + 2 < in.size(); i += 3) {
            const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                               (static_cast<unsigned char>(in[i + 1]) << 8) |
                               static_cast<unsigned char>(in[i + 2]);
            for (int j = 3; j >= 0; --j) b += tbl[(v >> (6 * j)) & 63];
        }
        if (b.size() > 8) out.push_back(b.substr(4, b.size() - 8));
    }
    return out;
}

// Whether any form of `secret` is in `seen`.
bool holds(const std::string& seen, const std::string& secret) {
    for (const auto& f : forms_of(secret))
        if (seen.find(f) != std::string::npos) return true;
    return false;
}

struct Secrets {
    std::string env = "image-env-secret-" + random_hex(12);
    std::string file = "image-file-secret-" + random_hex(12);
    std::string setup = "setup-secret-" + random_hex(12);
    std::string pip_token = "piptoken" + random_hex(16);
};

sky::PoolSpec spec_with(const Secrets& s, const fs::path& dir) {
    sky::PoolSpec spec;
    spec.image.env["SKY_TEST_IMAGE_SECRET"] = s.env;
    spec.image.files.push_back({(dir / "secret-file").string(), s.file + "\n", 0600});
    spec.image.setup.push_back("echo done > " + (dir / "setup-ran").string() + " # " + s.setup);
    return spec;
}

}  // namespace

TEST_CASE(
    "sealed bootstrap: the image's env, files and setup reach the node, and nothing of them "
    "crosses its shell in clear",
    "[bring_up][seal]") {
    Scratch scratch;
    auto local = shell_at(scratch.dir / "home");
    const Secrets s;
    for (const bool seal : {false, true}) {
        INFO("seal: " << seal);
        fs::remove(scratch.dir / "secret-file");
        fs::remove(scratch.dir / "setup-ran");
        fs::remove_all(scratch.dir / "home" / ".sky");
        RecordingShell shell(*local);
        BringUpOptions o;
        o.instance_id = "test-node";
        o.program_dir = program_dir();
        o.seal = seal;
        NodeBringUp up(shell, spec_with(s, scratch.dir), "p" + random_hex(8), 0, o);
        try {
            up.check([](sky::Event) {});
            up.ship([](sky::Event) {});
            up.bootstrap([](sky::Event) {});
        } catch (const sky::BootstrapError& e) {
            for (const auto& l : e.output()) UNSCOPED_INFO(l);
            FAIL(e.what());
        }
        // The image was made: its env in env.sh, its file with its mode, its setup run.
        std::string env_sh;
        for (const auto& e : fs::directory_iterator(scratch.dir / "home" / ".sky"))
            if (e.path().filename().string().rfind("image-", 0) == 0)
                env_sh = read_all(e.path() / "env.sh");
        CHECK(env_sh.find(s.env) != std::string::npos);
        CHECK(read_all(scratch.dir / "secret-file") == s.file + "\n");
        const auto file_mode =
            fs::status(scratch.dir / "secret-file").permissions() & fs::perms::all;
        CHECK(file_mode == (fs::perms::owner_read | fs::perms::owner_write));
        CHECK(fs::exists(scratch.dir / "setup-ran"));
        // No script left behind, sealed or not; no box directory either.
        CHECK_FALSE(fs::exists(up.run_dir() + "/bootstrap.sh"));
        const std::string seen = shell.seen();
        const auto boxes = box_dirs_in(seen);
        CHECK(boxes.size() == (seal ? 1u : 0u));
        CHECK(all_gone(boxes));
        if (!seal) {
            // The plain bring-up hands the node the script as it is: what the recorder
            // sees is what a reader of an unencrypted hop would.
            CHECK(holds(seen, s.env));
            CHECK(holds(seen, s.file));
            CHECK(holds(seen, s.setup));
            continue;
        }
        INFO(seen.size() << " bytes crossed");
        CHECK_FALSE(holds(seen, s.env));
        CHECK_FALSE(holds(seen, s.file));
        CHECK_FALSE(holds(seen, s.setup));
        CHECK(seen.find("SKY_TEST_IMAGE_SECRET") == std::string::npos);
        // What did cross: the node's public key came back, the box went in.
        CHECK(seen.find("unbox") != std::string::npos);
    }
}

TEST_CASE("sealed bootstrap: pip's index credentials never cross in clear, not even encoded",
          "[bring_up][seal]") {
    Scratch scratch;
    auto local = shell_at(scratch.dir / "home");
    const Secrets s;
    // No package is installed (pip may use no index here: nothing leaves this machine): the
    // bootstrap fails at pip, after the script, with its credentials, reached the node.
    sky::test::ScopedEnv no_index({{"PIP_NO_INDEX", "1"}, {"PIP_DISABLE_PIP_VERSION_CHECK", "1"}});
    sky::PoolSpec spec;
    spec.image.pip = {"skytokpkg==1.0"};
    spec.image.pip_extra_index_url = "http://sky:" + s.pip_token + "@127.0.0.1:9/simple";
    // The script holds the credentials base64-encoded: the reader must not find that either.
    const std::string script = spec.image.bootstrap(0);
    const auto at = script.find("sky_pip_netrc='");
    REQUIRE(at != std::string::npos);
    const std::string encoded = script.substr(at + 15, script.find('\'', at + 15) - (at + 15));
    REQUIRE(encoded.size() > 20);
    RecordingShell shell(*local);
    BringUpOptions o;
    o.instance_id = "test-node";
    o.program_dir = program_dir();
    o.seal = true;
    NodeBringUp up(shell, spec, "p" + random_hex(8), 0, o);
    up.check([](sky::Event) {});
    up.ship([](sky::Event) {});
    try {
        up.bootstrap([](sky::Event) {});
    } catch (const sky::BootstrapError&) {
        // pip found no index (or no Python here): expected, the script ran on the node.
    }
    const std::string seen = shell.seen();
    CHECK_FALSE(holds(seen, s.pip_token));
    CHECK(seen.find(encoded) == std::string::npos);
    CHECK(seen.find("skytokpkg") == std::string::npos);
}

TEST_CASE("sealed bootstrap: a box changed on the way is refused, and none of the script runs",
          "[bring_up][seal]") {
    Scratch scratch;
    auto local = shell_at(scratch.dir / "home");
    const Secrets s;
    for (const std::size_t where : {std::size_t{0}, std::size_t{40}, std::size_t{200}}) {
        INFO("byte " << where << " of the box flipped");
        RecordingShell shell(*local);
        shell.change_stdin = [where](std::string& in) {
            in[std::min(where, in.size() - 1)] ^= 0x20;
        };
        BringUpOptions o;
        o.instance_id = "test-node";
        o.program_dir = program_dir();
        o.seal = true;
        NodeBringUp up(shell, spec_with(s, scratch.dir), "p" + random_hex(8), 0, o);
        up.check([](sky::Event) {});
        up.ship([](sky::Event) {});
        try {
            up.bootstrap([](sky::Event) {});
            FAIL("a changed box was opened");
        } catch (const sky::BootstrapError& e) {
            std::string out;
            for (const auto& l : e.output()) out += l + "\n";
            INFO(e.what() << "\n" << out);
            CHECK(out.find("sky unbox:") != std::string::npos);
        }
        CHECK_FALSE(fs::exists(scratch.dir / "secret-file"));
        CHECK_FALSE(fs::exists(scratch.dir / "setup-ran"));
        const auto boxes = box_dirs_in(shell.seen());
        CHECK(boxes.size() == 1u);
        CHECK(all_gone(boxes));
    }
}
