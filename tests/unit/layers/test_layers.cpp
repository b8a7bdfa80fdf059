// The layers of src/ as the code must keep them: a component (a folder under src/, one per
// provider under src/providers/) includes only the components this table allows. A new edge is
// a design decision: it goes into the table with its reason, or the include goes.
//
// The build keeps them too: each component links (src/*/CMakeLists.txt, sky_component) the
// components it uses and sees no other one's headers. CMake writes what each links to
// <build>/src/layers.txt; the second test checks those links against this table and against
// the includes, so the build and the table cannot drift apart. The build's check is looser in
// one way: a component also sees what the components it links expose in their headers (a
// PUBLIC link), which is why the first test still reads every include.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// Every cloud adapter sees the same things: the cloud layer, the registry, the shared REST
// client, the catalog, HTTP and the utilities. None sees another cloud, the pool engine or SSH.
const std::set<std::string> cloud_adapter = {
    "providers/cloud", "providers/registry", "providers/rest", "catalog", "http", "util"};

const std::map<std::string, std::set<std::string>>& allowed() {
    static const std::map<std::string, std::set<std::string>> table = {
        {"util", {}},
        // The client's I/O core: the io_context and the async stream interface; its blocking
        // adapter is a runtime Transport (runtime/transport.hpp) over a stream.
        {"io", {"runtime", "util"}},
        {"catalog", {"util"}},
        {"http", {"util"}},
        {"bootstrap", {"util"}},
        {"metrics", {"catalog", "util"}},
        // The worker serves files for its peers (--sky-serve-files) and samples metrics.
        {"runtime", {"metrics", "ship", "util"}},
        // Sessions run on the I/O core; tunnels are io::Streams.
        {"ssh", {"io", "runtime", "util"}},
        {"ship", {"runtime", "ssh", "util"}},
        // The engine asks the registry for its backend (the one place that knows providers);
        // PoolSpec::validate checks the volumes.
        // The pool's node connections and its timer run on the I/O core.
        {"pool",
         {"bootstrap", "catalog", "io", "metrics", "providers/registry", "runtime", "util",
          "volumes"}},
        {"providers/registry", {"catalog", "pool", "util"}},
        // Every remote node mounts the pool's volumes (a bootstrap phase) and unmounts them.
        // The worker's tunnel reaches the pool as an io::Stream (the SSH layer's channel).
        {"providers/remote",
         {"bootstrap", "io", "pool", "runtime", "ship", "ssh", "util", "volumes"}},
        // Volumes: the endpoint check every endpoint gets, the node's SSH session. Debt: the
        // pool's AWS credentials come from the AWS adapter's loader, which belongs in a shared
        // place beside SigV4.
        {"volumes", {"http", "providers/aws", "ssh", "util"}},
        {"providers/cloud",
         {"catalog", "pool", "providers/registry", "providers/remote", "ssh", "util"}},
        // Local gives pip an image's settings in the same private files a node's bootstrap
        // writes (bootstrap/pip.hpp); a Local worker's socket pair is an io::FdStream.
        {"providers/local", {"bootstrap", "io", "pool", "providers/registry", "runtime", "util"}},
        {"providers/ssh", {"pool", "providers/registry", "providers/remote", "ssh", "util"}},
        // The REST clouds' shared descriptor helper makes their cloud backends and registers them.
        {"providers/rest", {"http", "providers/cloud", "providers/registry", "util"}},
        {"providers/aws", cloud_adapter},
        {"providers/digitalocean", cloud_adapter},
        {"providers/verda", cloud_adapter},
        {"providers/vastai", cloud_adapter},
        {"providers/runpod", cloud_adapter},
        // Simulated nodes are local worker processes behind the cloud layer.
        // Its nodes' streams count the calls they complete (lose_after_calls).
        {"providers/simulated",
         {"catalog", "io", "pool", "providers/cloud", "providers/local", "providers/registry",
          "runtime", "util"}},
        // A Slurm pool is one job: the login node over SSH (ssh), the program into its store
        // (ship), workers started with the runtime's launch variables, reached through io
        // streams. Of the cloud layer only its collector: `sky ls`/`sky gc` reach sky's jobs as
        // they reach a cloud's machines.
        {"providers/slurm",
         {"io", "pool", "providers/cloud", "providers/registry", "runtime", "ship", "ssh",
          "util"}},
        // The tool reaches providers only through their descriptors (the registry): `sky ls` and
        // `sky gc` name no provider.
        {"cli", {"catalog", "http", "pool", "providers/registry", "util"}},
    };
    return table;
}

std::string component_of(const std::string& rel) {
    const auto slash = rel.find('/');
    const std::string top = rel.substr(0, slash);
    if (top != "providers" || slash == std::string::npos) return top;
    const auto next = rel.find('/', slash + 1);
    return next == std::string::npos ? top : rel.substr(0, next);
}

// Every include of a component in src/ of another component: component -> components.
std::map<std::string, std::set<std::string>> included_components(const fs::path& src) {
    const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
    std::map<std::string, std::set<std::string>> out;
    for (const auto& entry : fs::recursive_directory_iterator(src)) {
        const auto ext = entry.path().extension();
        if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
        const std::string from = component_of(fs::relative(entry.path(), src).generic_string());
        out[from];
        std::ifstream in(entry.path());
        for (std::string line; std::getline(in, line);) {
            std::smatch m;
            if (!std::regex_search(line, m, include_line)) continue;
            const std::string target = m[1].str();
            if (target.rfind("sky/", 0) == 0 || !fs::exists(src / target)) continue;
            const std::string to = component_of(target);
            if (to != from) out[from].insert(to);
        }
    }
    return out;
}

}  // namespace

TEST_CASE("layers: each component of src/ includes only what the table allows", "[layers]") {
    const fs::path src = fs::path(SKY_SOURCE_DIR) / "src";
    REQUIRE(fs::is_directory(src));
    const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
    std::set<std::string> components;
    int files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(src)) {
        const auto ext = entry.path().extension();
        if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
        ++files;
        const std::string rel = fs::relative(entry.path(), src).generic_string();
        const std::string from = component_of(rel);
        components.insert(from);
        std::ifstream in(entry.path());
        int line_no = 0;
        for (std::string line; std::getline(in, line);) {
            ++line_no;
            std::smatch m;
            if (!std::regex_search(line, m, include_line)) continue;
            const std::string target = m[1].str();
            if (target.rfind("sky/", 0) == 0) continue;  // the public headers: anyone
            const std::string to = component_of(target);
            if (to == from || !fs::exists(src / target)) continue;
            auto rule = allowed().find(from);
            INFO(rel << ":" << line_no << " includes \"" << target << "\"");
            REQUIRE(rule != allowed().end());  // a new component needs a row
            CHECK(rule->second.count(to) == 1);
        }
    }
    CHECK(files > 50);
    for (const auto& c : components) {
        INFO("component " << c);
        CHECK(allowed().count(c) == 1);
    }
}

TEST_CASE("layers: each component links exactly the components it includes, as the table allows",
          "[layers]") {
    const fs::path src = fs::path(SKY_SOURCE_DIR) / "src";
    const fs::path layers = fs::path(SKY_BINARY_DIR) / "src" / "layers.txt";
    REQUIRE(fs::is_regular_file(layers));
    // "<component>: <dep> <dep> ...", a component's line once per CMake target in its folder.
    std::map<std::string, std::set<std::string>> links;
    std::ifstream in(layers);
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        const auto colon = line.find(':');
        REQUIRE(colon != std::string::npos);
        auto& deps = links[line.substr(0, colon)];
        std::istringstream words(line.substr(colon + 1));
        for (std::string d; words >> d;) deps.insert(d);
    }
    const auto includes = included_components(src);
    REQUIRE(includes.size() > 10);
    for (const auto& [component, used] : includes) {
        INFO("component " << component);
        // Every folder with sources is a component that declares what it links.
        REQUIRE(links.count(component) == 1);
        const auto& linked = links.at(component);
        const auto rule = allowed().find(component);
        REQUIRE(rule != allowed().end());
        for (const auto& dep : linked) {
            INFO("links " << dep);
            CHECK(rule->second.count(dep) == 1);  // the table allows the link
            CHECK(used.count(dep) == 1);          // and something includes it: no spare link
        }
        for (const auto& dep : used) {
            INFO("includes " << dep);
            CHECK(linked.count(dep) == 1);  // what it includes, it links itself
        }
    }
    for (const auto& [component, deps] : links) {
        INFO("component " << component << " in layers.txt");
        CHECK(includes.count(component) == 1);
    }
}

TEST_CASE("layers: the public headers include no Boost, libcurl or libssh2, but sky/asio.hpp Asio",
          "[layers]") {
    // A program that includes <sky/sky.hpp> needs only the standard library and cereal; the one
    // optional header for asynchronous use (api.md section 2b) brings Boost.Asio.
    const fs::path include = fs::path(SKY_SOURCE_DIR) / "include";
    const std::regex system_include(R"(^\s*#\s*include\s+<([^>]+)>)");
    int headers = 0;
    for (const auto& entry : fs::recursive_directory_iterator(include)) {
        if (!entry.is_regular_file() || entry.path().extension() != ".hpp") continue;
        ++headers;
        const std::string rel = fs::relative(entry.path(), include).generic_string();
        std::ifstream in(entry.path());
        int line_no = 0;
        for (std::string line; std::getline(in, line);) {
            ++line_no;
            std::smatch m;
            if (!std::regex_search(line, m, system_include)) continue;
            const std::string target = m[1].str();
            INFO(rel << ":" << line_no << " includes <" << target << ">");
            CHECK(target.rfind("curl/", 0) != 0);
            CHECK(target.rfind("libssh2", 0) != 0);
            const bool boost = target.rfind("boost/", 0) == 0;
            if (rel == "sky/asio.hpp")
                CHECK((!boost || target.rfind("boost/asio", 0) == 0));
            else
                CHECK_FALSE(boost);
        }
    }
    CHECK(headers > 10);
}
