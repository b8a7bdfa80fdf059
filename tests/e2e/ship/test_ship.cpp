// Program shipping on test hosts whose /root, /tmp and /home are their own and that cannot see
// the build tree: a program with a library of its own, found only next to it, must reach every
// node; a changed library must be sent again and used; each file leaves the client once.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "hosts/test_hosts.hpp"

using sky::test::TestHosts;
namespace fs = std::filesystem;

namespace {

struct Run {
    int status = -1;
    std::map<int, int> values;                              // node -> value
    std::map<std::string, std::uint64_t> steps;             // step -> largest bytes_total seen
    std::map<std::string, std::set<std::string>> nodes_in;  // step -> instances that had it
    std::string output;
};

// A private copy of the program and one variant of its library, in a directory of the client's
// that no host can see.
class ProgramDir {
public:
    ProgramDir() {
        std::string t = (fs::temp_directory_path() / "sky-ship-test-XXXXXX").string();
        if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
        dir_ = t;
    }
    ~ProgramDir() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    void install(const char* program, const char* library, const char* extra = nullptr) {
        fs::copy_file(program, dir_ / "ship_program", fs::copy_options::overwrite_existing);
        // A new file (new inode, new mtime), as a rebuild makes it.
        fs::remove(dir_ / "libshipvalue.so");
        fs::copy_file(library, dir_ / "libshipvalue.so");
        if (extra)
            fs::copy_file(extra, dir_ / fs::path(extra).filename(),
                          fs::copy_options::overwrite_existing);
    }
    Run run(const TestHosts& hosts, int nodes) const {
        std::ofstream spec(dir_ / "hosts");
        spec << hosts.client_key_path().string() << "\n"
             << hosts.known_hosts_file().string() << "\n"
             << hosts.port(0) << "\n";
        for (int i = 0; i < hosts.size(); ++i) spec << hosts.address(i) << "\n";
        spec.close();
        auto r = sky::test::run_command(
            {(dir_ / "ship_program").string(), (dir_ / "hosts").string(), std::to_string(nodes)},
            std::chrono::seconds(120));
        Run out;
        out.status = r.status;
        out.output = r.output;
        std::istringstream is(r.output);
        for (std::string l; std::getline(is, l);) {
            std::istringstream ls(l);
            std::string kind;
            ls >> kind;
            if (kind == "value") {
                int node = -1, v = 0;
                ls >> node >> v;
                out.values[node] = v;
            } else if (kind == "step") {
                std::string name;
                std::uint64_t done = 0, total = 0;
                std::string instance;
                ls >> name >> done >> total >> instance;
                out.steps[name] = std::max(out.steps[name], total);
                out.nodes_in[name].insert(instance);
            }
        }
        return out;
    }
    [[nodiscard]] const fs::path& path() const { return dir_; }

private:
    fs::path dir_;
};

}  // namespace

TEST_CASE("ship: a program's own library, found only next to it, reaches every node",
          "[ship][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(3);
    ProgramDir dir;
    dir.install(SHIP_PROGRAM, SHIP_LIB_A);
    // The hosts cannot see the program's directory (nothing passes by accident).
    auto probe = sky::test::run_command(
        hosts.ssh_command(0, "test -e " + dir.path().string() + " && echo visible || echo hidden"));
    CHECK(probe.output.find("hidden") != std::string::npos);

    auto first = dir.run(hosts, 3);
    INFO(first.output);
    REQUIRE(first.status == 0);
    REQUIRE(first.values.size() == 3);
    for (auto& [node, v] : first.values) CHECK(v == 1);
    // One node received the files from this client; the others from it.
    CHECK(first.nodes_in["upload"].size() == 1);
    CHECK(first.nodes_in["fetch"].size() == 2);
    CHECK(first.steps["upload"] > 0);
    // The hosts' own system libraries (libstdc++, libcrypto, ...) have the same content as this
    // machine's: they are taken from the node, only the program and its own library are sent.
    CHECK(first.steps["upload"] <= fs::file_size(SHIP_PROGRAM) + fs::file_size(SHIP_LIB_A));

    // A new build: same program, changed library. Warm nodes must use the new one.
    dir.install(SHIP_PROGRAM, SHIP_LIB_B);
    auto second = dir.run(hosts, 3);
    INFO(second.output);
    REQUIRE(second.status == 0);
    REQUIRE(second.values.size() == 3);
    for (auto& [node, v] : second.values) CHECK(v == 2);
    CHECK(second.steps.count("cached") == 0);
    // Only the library moved: the program itself was already on the nodes.
    CHECK(second.steps["upload"] > 0);
    CHECK(second.steps["upload"] < fs::file_size(SHIP_PROGRAM));

    // Unchanged: nothing moves.
    auto third = dir.run(hosts, 3);
    INFO(third.output);
    REQUIRE(third.status == 0);
    for (auto& [node, v] : third.values) CHECK(v == 2);
    CHECK(third.steps.count("upload") == 0);
    CHECK(third.steps.count("fetch") == 0);
    CHECK(third.steps.count("cached") == 1);
}

TEST_CASE("ship: a library sky must not ship fails the worker with the loader's words",
          "[ship][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    ProgramDir dir;
    dir.install(SHIP_DRIVER_PROGRAM, SHIP_LIB_A, SHIP_DRIVER_LIB);
    auto r = dir.run(hosts, 1);
    INFO(r.output);
    CHECK(r.status == 3);
    CHECK(r.output.find("bootstrap-error worker") != std::string::npos);
    CHECK(r.output.find("libnvidia-skytest.so") != std::string::npos);
    CHECK(r.output.find("cannot open shared object file") != std::string::npos);
}

TEST_CASE("ship: a node that cannot reach its peers gets the files from the client",
          "[ship][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    // Each host can still talk to this machine, but no longer to the other host.
    for (int i = 0; i < 2; ++i) {
        auto r = sky::test::run_command({"ip", "-n", hosts.netns(i), "route", "add", "blackhole",
                                         hosts.address(1 - i) + "/32"});
        REQUIRE(r.status == 0);
    }
    ProgramDir dir;
    dir.install(SHIP_PROGRAM, SHIP_LIB_A);
    auto r = dir.run(hosts, 2);
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE(r.values.size() == 2);
    for (auto& [node, v] : r.values) CHECK(v == 1);
    CHECK(r.nodes_in["upload"].size() == 2);  // both nodes received from the client
    CHECK(r.nodes_in.count("fetch") == 1);    // after one tried its peer in vain
}
