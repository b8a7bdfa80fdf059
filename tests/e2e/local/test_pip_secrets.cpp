// An image's pip index credentials on a Local pool (security review r4 M2): pip runs on this
// machine, where every user can list processes with their arguments. While the pool installs a
// package from a private index whose URL carries a token, an unprivileged process reads every
// process's command line and must never find the token; the package must still come from that
// index, with the token.
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

namespace fs = std::filesystem;

namespace local_pip {
std::string import_value() {
    std::string out;
    if (FILE* p = ::popen("python3 -c 'import skytokpkg; print(skytokpkg.VALUE)' 2>&1", "r")) {
        char buf[256];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}
}  // namespace local_pip

TEST_CASE("Local: a pip index token reaches pip and no process's command line on this machine",
          "[local][security]") {
    if (std::system("python3 -c 'import venv, ensurepip' > /dev/null 2>&1") != 0) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    if (::geteuid() != 0 || std::system("command -v setpriv > /dev/null 2>&1") != 0) {
        WARN("skipped: watching as another user needs root and setpriv");
        return;
    }
    char dir_tmpl[] = "/tmp/sky-local-pip-XXXXXX";
    REQUIRE(::mkdtemp(dir_tmpl));
    const fs::path dir = dir_tmpl;
    struct Cleanup {
        fs::path d;
        ~Cleanup() {
            std::error_code ec;
            fs::remove_all(d, ec);
        }
    } cleanup{dir};
    fs::permissions(dir, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
    unsigned char b[16];
    REQUIRE(RAND_bytes(b, sizeof b) == 1);
    std::string token = "skypiptoken";
    for (auto c : b) token += "0123456789abcdef"[c & 15];
    std::ofstream(dir / "token") << token << "\n";
    fs::permissions(dir / "token", fs::perms::owner_read | fs::perms::others_read);
    auto index = std::async(std::launch::async, [&] {
        return sky::test::run_command(
            {"python3", SKY_PIP_INDEX_SCRIPT, "127.0.0.1", (dir / "port").string(),
             (dir / "token").string(), "240", (dir / "stop").string()},
            std::chrono::seconds(300));
    });
    // The index and the watcher end when the stop file exists: after the pool, however long its
    // pip took on a loaded machine, or as soon as the test fails (before the futures wait).
    struct Stop {
        fs::path file;
        ~Stop() { std::ofstream(file) << "stop\n"; }
    };
    Stop stop_index{dir / "stop"};
    REQUIRE(
        sky::test::wait_until([&] { return fs::exists(dir / "port"); }, std::chrono::seconds(20)));
    std::string port;
    std::ifstream(dir / "port") >> port;
    auto watcher = std::async(std::launch::async, [&] {
        return sky::test::run_command(
            {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
             SKY_PS_WATCH_SCRIPT, "240", (dir / "token").string(), (dir / "stop").string()},
            std::chrono::seconds(300));
    });
    Stop stop_watcher{dir / "stop"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the watcher is watching
    {
        // This machine's pip gets the test's index without credentials instead of PyPI (nothing
        // from the internet) and may use plain http to it; the venv is made under a scratch
        // SKY_HOME, removed with the test.
        sky::test::ScopedEnv env({{"PIP_INDEX_URL", "http://127.0.0.1:" + port + "/public/simple"},
                                  {"PIP_TRUSTED_HOST", "127.0.0.1"},
                                  {"PIP_RETRIES", "0"},
                                  {"PIP_TIMEOUT", "10"},
                                  {"SKY_HOME", (dir / "home").string()}});
        try {
            sky::ComputePool pool{
                {.provider = sky::Local{},
                 .nodes = 1,
                 .image = sky::Image{.pip = {"skytokpkg==1.0"},
                                     .pip_extra_index_url =
                                         "http://sky:" + token + "@127.0.0.1:" + port + "/simple"},
                 .display = sky::Display::quiet}};
            // The package came from the private index into the pool's venv.
            CHECK((sky::compute<local_pip::import_value>() >> pool) == "4242\n");
        } catch (const sky::BootstrapError& e) {
            for (const auto& l : e.output()) UNSCOPED_INFO(l);
            FAIL(e.what());
        }
    }
    std::ofstream(dir / "stop") << "stop\n";  // the pool is done: the index and watcher end
    // pip's private files are gone.
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
        if (e.path().filename().string().rfind("sky-pip-", 0) == 0) {
            struct stat st {};
            if (::stat(e.path().c_str(), &st) == 0 && st.st_uid == ::geteuid())
                CHECK(::time(nullptr) - st.st_mtime > 600);  // none of this test's
        }
    auto w = watcher.get();
    INFO(w.output);
    REQUIRE(w.output.find("watcher uid=65534") != std::string::npos);
    REQUIRE(w.output.find("watcher done") != std::string::npos);
    CHECK(w.output.find("secret-in-ps") == std::string::npos);
    auto served = index.get();
    INFO(served.output);
    CHECK(served.output.find("served /simple/skytokpkg/ auth=yes") != std::string::npos);
}
