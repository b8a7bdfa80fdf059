// A Local node reports its bootstrap as a cloud node does, and applies what it can of the image
// (env, files, a pip environment) on this machine, saying plainly what it skips.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "e2e/local/functions.hpp"
#include "e2e/local/recorder.hpp"
#include "pool/display.hpp"

namespace e2e_bootstrap {

// What `cmd` printed, run by the worker (so with the worker's environment).
std::string run_shell(std::string cmd) {
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[512];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

std::string read_text(std::string path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "<missing>";
    return {std::istreambuf_iterator<char>(in), {}};
}

unsigned mode_of(std::string path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

}  // namespace e2e_bootstrap

using namespace e2e;
using namespace e2e_bootstrap;
namespace fs = std::filesystem;

namespace {

// Where in `events` the first one `pred` accepts is (events.size() when none).
std::size_t position(const std::vector<Recorder::Seen>& events,
                     const std::function<bool(const sky::Event&)>& pred) {
    for (std::size_t i = 0; i < events.size(); ++i)
        if (pred(events[i].event)) return i;
    return events.size();
}

template <class E>
std::size_t count_for(const std::vector<Recorder::Seen>& events, const std::string& id) {
    std::size_t n = 0;
    for (auto& s : events)
        if (auto* e = std::get_if<E>(&s.event); e && e->instance_id == id) ++n;
    return n;
}

template <class E>
std::function<bool(const sky::Event&)> of(const std::string& id) {
    return [id](const sky::Event& e) {
        auto* x = std::get_if<E>(&e);
        return x && x->instance_id == id;
    };
}

std::function<bool(const sky::Event&)> step(const std::string& id, const std::string& name) {
    return [id, name](const sky::Event& e) {
        auto* x = std::get_if<sky::BootstrapProgress>(&e);
        return x && x->instance_id == id && x->step == name;
    };
}

// Every node: InstanceProvisioned, BootstrapStarting, its "worker" step, BootstrapCompleted,
// each once and in that order, all before PoolStarted (a cloud node's order).
void check_cloud_order(const std::vector<Recorder::Seen>& ev, const std::vector<std::string>& ids) {
    const std::size_t started = position(
        ev, [](const sky::Event& e) { return std::holds_alternative<sky::PoolStarted>(e); });
    REQUIRE(started < ev.size());
    for (const auto& id : ids) {
        INFO("instance " << id);
        CHECK(count_for<sky::InstanceProvisioned>(ev, id) == 1);
        CHECK(count_for<sky::BootstrapStarting>(ev, id) == 1);
        CHECK(count_for<sky::BootstrapCompleted>(ev, id) == 1);
        const std::size_t provisioned = position(ev, of<sky::InstanceProvisioned>(id));
        const std::size_t starting = position(ev, of<sky::BootstrapStarting>(id));
        const std::size_t worker = position(ev, step(id, "worker"));
        const std::size_t completed = position(ev, of<sky::BootstrapCompleted>(id));
        CHECK(provisioned < starting);
        CHECK(starting < worker);
        CHECK(worker < completed);
        CHECK(completed < started);
    }
}

// Sets an environment variable for one test (the pool's workers and bootstrap inherit it).
struct ScopedEnv {
    std::string name;
    std::optional<std::string> old;
    ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
        if (const char* v = std::getenv(name.c_str())) old = v;
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old)
            ::setenv(name.c_str(), old->c_str(), 1);
        else
            ::unsetenv(name.c_str());
    }
};

bool python_venv_available() {
    return std::system("python3 -c 'import venv, ensurepip' > /dev/null 2>&1") == 0;
}

}  // namespace

TEST_CASE(
    "Local sends BootstrapStarting and BootstrapCompleted for each node, in a cloud node's "
    "order",
    "[local][bootstrap]") {
    Recorder rec;
    auto spec = quiet(3);
    spec.on_event = rec.callback();
    std::vector<std::string> ids;
    {
        sky::ComputePool pool{spec};
        for (auto& i : pool.instances()) ids.push_back(i.id);
        CHECK((sky::compute<add>(1, 2) >> pool) == 3);
    }
    REQUIRE(ids.size() == 3);
    check_cloud_order(rec.all(), ids);
}

TEST_CASE("Simulated sends BootstrapStarting and BootstrapCompleted once per node, not twice",
          "[local][bootstrap]") {
    Recorder rec;
    std::vector<std::string> ids;
    {
        sky::ComputePool pool{{.provider = sky::Simulated{},
                               .nodes = 2,
                               .spot = sky::Spot::Never{},
                               .display = sky::Display::quiet,
                               .on_event = rec.callback(),
                               .collect_metrics = false}};
        for (auto& i : pool.instances()) ids.push_back(i.id);
    }
    REQUIRE(ids.size() == 2);
    check_cloud_order(rec.all(), ids);
}

TEST_CASE(
    "Local writes the image's files where a node has them and removes them when the pool "
    "ends",
    "[local][bootstrap]") {
    TempDir dir;
    const std::string file = dir.path + "/made/by/sky/conf.txt";
    Recorder rec;
    auto spec = quiet(2);
    spec.on_event = rec.callback();
    spec.image.env = {{"SKY_E2E_IMAGE_ENV", "from the image"}};
    spec.image.files = {{file, "key = 'value'\n", 0640}};
    std::string id;
    {
        sky::ComputePool pool{spec};
        id = pool.instances().at(0).id;
        for (const auto& content : sky::compute<read_text>(file) | pool)
            CHECK(content == "key = 'value'\n");
        CHECK((sky::compute<mode_of>(file) >> pool) == 0640);
        CHECK((sky::compute<getenv_of>(std::string("SKY_E2E_IMAGE_ENV")) >> pool) ==
              "from the image");
    }
    const auto steps = rec.steps(id);
    CHECK(steps == std::vector<std::string>{"env", "files", "worker"});
    // Gone with the pool, and so are the directories it made for it; what was there stays.
    CHECK_FALSE(fs::exists(file));
    CHECK_FALSE(fs::exists(dir.path + "/made"));
    CHECK(fs::is_directory(dir.path));
}

TEST_CASE("Local never replaces a file of this machine: a BootstrapError in phase files",
          "[local][bootstrap]") {
    TempDir dir;
    const std::string file = dir.path + "/mine.txt";
    std::ofstream(file) << "the user's own\n";
    auto spec = quiet(1);
    spec.image.files = {{file, "the image's\n", 0644}};
    try {
        sky::ComputePool pool{spec};
        FAIL("a pool replaced a file of this machine");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.phase() == "files");
        CHECK(std::string(e.what()).find(file) != std::string::npos);
    }
    CHECK(read_text(file) == "the user's own\n");
    // The same content is no conflict, and the file is not the pool's to remove.
    spec.image.files = {{file, "the user's own\n", 0644}};
    {
        sky::ComputePool pool{spec};
        CHECK((sky::compute<read_text>(file) >> pool) == "the user's own\n");
    }
    CHECK(read_text(file) == "the user's own\n");
}

TEST_CASE("Local says plainly in its events what of the image it skips, and the log shows it",
          "[local][bootstrap]") {
    TempDir dir;
    const std::string marker = dir.path + "/setup-ran";
    Recorder rec;
    auto spec = quiet(1);
    spec.on_event = rec.callback();
    spec.image.apt = {"bash", "sky-no-such-package-xyz"};
    spec.image.setup = {"touch '" + marker + "'"};
    std::string id;
    {
        sky::ComputePool pool{spec};
        id = pool.instances().at(0).id;
        CHECK((sky::compute<add>(2, 2) >> pool) == 4);
    }
    const auto steps = rec.steps(id);
    REQUIRE(steps.size() == 6);
    CHECK(steps[0] == "apt");
    // bash is installed here: only the missing package is named.
    CHECK(steps[1] ==
          "apt skipped on Local: sky-no-such-package-xyz not installed on this machine (Local "
          "installs no system packages)");
    CHECK(steps[2] == "env");
    CHECK(steps[3] == "setup");
    CHECK(steps[4].rfind("setup skipped on Local: 1 command not run", 0) == 0);
    CHECK(steps[5] == "worker");
    CHECK_FALSE(fs::exists(marker));  // the setup command did not run on this machine
    // The log display prints the notice as it prints every bootstrap step.
    std::FILE* out = std::tmpfile();
    REQUIRE(out);
    {
        sky::detail::DisplayRenderer log(sky::Display::log, out, false);
        log.show(sky::BootstrapProgress{id, steps[1]});
    }
    std::rewind(out);
    char buf[512] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, out);
    std::fclose(out);
    CHECK(std::string(buf, n) == "sky: " + id + ": bootstrap " + steps[1] + "\n");
}

TEST_CASE("Local makes the image's pip environment and the worker runs with it active",
          "[local][bootstrap]") {
    if (!python_venv_available()) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    TempDir home;
    ScopedEnv sky_home("SKY_HOME", home.path);
    ScopedEnv no_index("PIP_NO_INDEX", "1");  // nothing from the network: a wheel made here
    const std::string wheel = home.path + "/skytestpkg-0.1-py3-none-any.whl";
    const std::string make_wheel =
        "python3 - '" + wheel +
        "' <<'EOF'\n"
        "import sys, zipfile\n"
        "with zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
        "    z.writestr('skytestpkg/__init__.py', 'VALUE = 42\\n')\n"
        "    z.writestr('skytestpkg-0.1.dist-info/METADATA', "
        "'Metadata-Version: 2.1\\nName: skytestpkg\\nVersion: 0.1\\n')\n"
        "    z.writestr('skytestpkg-0.1.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: "
        "sky-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
        "    z.writestr('skytestpkg-0.1.dist-info/RECORD', 'skytestpkg/__init__.py,,\\n"
        "skytestpkg-0.1.dist-info/METADATA,,\\nskytestpkg-0.1.dist-info/WHEEL,,\\n"
        "skytestpkg-0.1.dist-info/RECORD,,\\n')\n"
        "EOF";
    REQUIRE(std::system(make_wheel.c_str()) == 0);
    Recorder rec;
    auto spec = quiet(2);
    spec.on_event = rec.callback();
    spec.image.pip = {wheel};
    std::string id;
    {
        sky::ComputePool pool{spec};
        id = pool.instances().at(0).id;
        for (const auto& venv : sky::compute<getenv_of>(std::string("VIRTUAL_ENV")) | pool) {
            CHECK(venv.rfind(home.path + "/local/venv-", 0) == 0);
            CHECK(fs::is_regular_file(venv + "/bin/python3"));
        }
        const std::string venv = sky::compute<getenv_of>(std::string("VIRTUAL_ENV")) >> pool;
        CHECK((sky::compute<getenv_of>(std::string("PATH")) >> pool).rfind(venv + "/bin:", 0) == 0);
        // python3 and pip of the worker are the venv's, with the image's package in it.
        CHECK((sky::compute<run_shell>(std::string(
                   "python3 -c 'import skytestpkg, sys; print(skytestpkg.VALUE, sys.prefix)'")) >>
               pool) == "42 " + venv + "\n");
        CHECK((sky::compute<run_shell>(std::string("command -v pip")) >> pool) ==
              venv + "/bin/pip\n");
    }
    const auto steps = rec.steps(id);
    CHECK(steps == std::vector<std::string>{"python", "pip", "env", "worker"});
}

TEST_CASE("Local says so when the image's Python version is not on this machine and uses python3",
          "[local][bootstrap]") {
    if (!python_venv_available()) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    TempDir home;
    ScopedEnv sky_home("SKY_HOME", home.path);
    Recorder rec;
    auto spec = quiet(1);
    spec.on_event = rec.callback();
    spec.image.python = "3.99";  // no such interpreter anywhere
    std::string id;
    {
        sky::ComputePool pool{spec};
        id = pool.instances().at(0).id;
        const std::string venv = sky::compute<getenv_of>(std::string("VIRTUAL_ENV")) >> pool;
        CHECK(venv.rfind(home.path + "/local/venv-", 0) == 0);
        CHECK((sky::compute<run_shell>(std::string("command -v python3")) >> pool) ==
              venv + "/bin/python3\n");
    }
    const auto steps = rec.steps(id);
    REQUIRE(steps.size() == 4);
    CHECK(steps[0] == "python");
    CHECK(steps[1].rfind("python 3.99 skipped on Local: no python3.99 on this machine, the venv "
                         "uses /",
                         0) == 0);
    CHECK(steps[2] == "env");
    CHECK(steps[3] == "worker");
}

TEST_CASE(
    "Local fails the pool with a BootstrapError in phase pip when a package cannot be "
    "installed",
    "[local][bootstrap]") {
    if (!python_venv_available()) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    TempDir home;
    ScopedEnv sky_home("SKY_HOME", home.path);
    ScopedEnv no_index("PIP_NO_INDEX", "1");  // no network wait: pip finds nothing at once
    auto spec = quiet(2);
    spec.image.pip = {"sky-no-such-package-xyz"};
    try {
        sky::ComputePool pool{spec};
        FAIL("the pool ran without the image's packages");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.phase() == "pip");
        CHECK(std::string(e.what()).find("sky-no-such-package-xyz") != std::string::npos);
        CHECK_FALSE(e.output().empty());  // pip's own words
    }
}
