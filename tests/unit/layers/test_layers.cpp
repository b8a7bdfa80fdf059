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
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Every cloud adapter sees the same things: the descriptor vocabulary, the cloud layer, the
// shared REST client, the catalog, HTTP and the utilities. None sees another cloud, the pool
// engine, SSH or the registry (which sits above them and lists them).
const std::set<std::string> cloud_adapter = {
    "providers/cloud", "providers/descriptor", "providers/rest", "catalog", "http", "util"};

// The table, written from the ground floor up: a row names only components of earlier rows.
// The third test checks that neither the table nor the includes have a cycle (the levels it
// computes are drawn in docs/architecture.md).
const std::map<std::string, std::set<std::string>>& allowed() {
    static const std::map<std::string, std::set<std::string>> table = {
        // The ground floor. core holds the public error types' constructors: a
        // component that throws sky::Error depends on it and on nothing else.
        {"core", {}},
        {"util", {}},
        // Leaf services and drivers.
        {"catalog", {"util"}},
        {"http", {"util"}},
        // The pool ledger, on its own: the pool, the providers that write to it and the tool
        // that reads it all sit above it.
        {"ledger", {"util"}},
        // The AWS wire code (SigV4, XML, EC2, STS, the credentials loader) is a driver beside
        // http: the AWS provider and volumes (S3) both use it.
        {"aws", {"http", "util"}},
        {"metrics", {"catalog", "util"}},
        // The I/O core: the io_context, the async stream interface, the blocking Transport the
        // wire runs over (io/transport.hpp) and the adapter from one to the other.
        {"io", {"util"}},
        // The runtime: the wire and the worker, over the I/O core's stream types. The worker
        // samples metrics; its process modes (serving calls, serving files to peers) are its
        // own, in runtime/worker/.
        {"runtime", {"io", "metrics", "util"}},
        // Sessions run on the I/O core; tunnels are io::Streams, blocking ones io::Transports.
        {"ssh", {"io", "util"}},
        // A node's shell: what bringing a node up needs of the machine (run, upload, home,
        // a channel, reconnect), over an SSH session or on this machine. Its channels are
        // io::Streams.
        {"node", {"io", "runtime", "ssh", "util"}},
        // The image's bootstrap script prints the node's phase marks (runtime/node_marks.hpp,
        // beside the launcher that prints the worker's).
        {"bootstrap", {"node", "runtime", "util"}},
        // Shipping and volumes reach the node through its shell, never through SSH itself.
        {"ship", {"node", "runtime", "util"}},
        // Volumes: the endpoint check every endpoint gets, the node's shell, the AWS
        // credentials and STS for S3.
        {"volumes", {"aws", "http", "node", "runtime", "util"}},
        // The pool engine. It names no provider: its backend factory and its provider's stated
        // facts come to PoolCore's constructor (pool/backend_factory.hpp) from the registry
        // above it (which also holds PoolSpec::validate, whose last check is the provider's).
        // Node connections and the timer run on the I/O core; the ledger records what it starts.
        {"pool", {"catalog", "io", "ledger", "metrics", "runtime", "util"}},
        // What a provider is (ProviderDescriptor), over the pool's Backend, with the facts each
        // provider states (its billing policy is the catalog's vocabulary).
        {"providers/descriptor", {"catalog", "pool"}},
        // The providers. providers/remote holds the one node bring-up over a shell (check, ship,
        // bootstrap, volumes, the launcher, exit reason), which every remote provider uses, and
        // RemoteNode, that bring-up over SSH. Every remote node mounts the pool's volumes (a
        // bootstrap phase) and unmounts them. The worker's tunnel reaches the pool as an io::Stream
        // (the
        // SSH layer's channel).
        {"providers/remote",
         {"bootstrap", "io", "node", "pool", "runtime", "ship", "ssh", "util", "volumes"}},
        // A node's boot and host key rotation are .sh files with their values (node/scripts.hpp).
        {"providers/cloud",
         {"catalog", "ledger", "node", "pool", "providers/descriptor", "providers/remote", "ssh",
          "util"}},
        // Local gives pip an image's settings in the same private files a node's bootstrap
        // writes (bootstrap/pip.hpp); a Local worker's socket pair is an io::FdStream; its
        // image checks are .sh files with their values (node/scripts.hpp) printing node marks
        // (runtime/node_marks.hpp).
        {"providers/local",
         {"bootstrap", "io", "ledger", "node", "pool", "providers/descriptor", "runtime", "util"}},
        {"providers/ssh",
         {"ledger", "pool", "providers/descriptor", "providers/remote", "ssh", "util"}},
        // The REST clouds' shared descriptor helper makes their cloud backends.
        // A container node's first boot is a .sh file with its values (node/scripts.hpp).
        {"providers/rest", {"http", "node", "providers/cloud", "providers/descriptor", "util"}},
        // The AWS adapter speaks EC2 through the AWS wire code.
        {"providers/aws",
         {"aws", "catalog", "http", "providers/cloud", "providers/descriptor", "util"}},
        {"providers/digitalocean", cloud_adapter},
        {"providers/verda", cloud_adapter},
        {"providers/vastai", cloud_adapter},
        {"providers/runpod", cloud_adapter},
        // Simulated nodes are local worker processes behind the cloud layer.
        // Its nodes' streams count the calls they complete (lose_after_calls).
        {"providers/simulated",
         {"catalog", "io", "ledger", "pool", "providers/cloud", "providers/descriptor",
          "providers/local", "runtime", "util"}},
        // A Slurm pool is one job: the login node's shell over SSH (node, ssh), the program
        // into its store (ship), each node brought up by the one bring-up
        // (providers/remote/bring_up.hpp) over its srun shell, workers reached through the
        // login shell's channels. Of the cloud layer only its collector: `sky ls`/`sky gc`
        // reach sky's jobs as they reach a cloud's machines.
        {"providers/slurm",
         {"ledger", "node", "pool", "providers/cloud", "providers/descriptor", "providers/remote",
          "runtime", "ship", "ssh", "util"}},
        // Kubernetes: kubeconfig credentials (util's subprocess runs exec plugins), the API
        // server's REST on the HTTP client and its streams on the I/O core, a pod as a node
        // shell brought up by the one bring-up (providers/remote), `sky ls`/`sky gc` through the
        // cloud layer's collect, the ledger's pool reference.
        {"providers/kubernetes",
         {"http", "io", "ledger", "node", "pool", "providers/cloud", "providers/descriptor",
          "providers/remote", "ship", "util"}},
        // The composition root. The registry lists every provider and links each one
        // (its CMakeLists.txt), and ComputePool's constructor wires them into the pool;
        // PoolSpec::validate checks the volumes and asks the provider's descriptor.
        {"providers/registry",
         {"io", "pool", "volumes", "providers/aws", "providers/cloud", "providers/descriptor",
          "providers/digitalocean", "providers/kubernetes", "providers/local", "providers/runpod",
          "providers/simulated", "providers/slurm", "providers/ssh", "providers/vastai",
          "providers/verda"}},
        // The tool reaches providers only through their descriptors (the registry):
        // `sky ls` and `sky gc` name no provider; it reads pools' ledgers.
        {"cli", {"catalog", "http", "ledger", "pool", "providers/registry", "util"}},
    };
    return table;
}

// A topological order of `graph` (component -> what it includes), ground floor first; when there
// is none, the cycle found ("a -> b -> a") in `cycle`.
std::vector<std::string> topological_order(
    const std::map<std::string, std::set<std::string>>& graph, std::string& cycle) {
    enum class Mark { none, open, done };
    std::map<std::string, Mark> mark;
    std::vector<std::string> order, path;
    std::function<bool(const std::string&)> visit = [&](const std::string& c) {
        if (mark[c] == Mark::done) return true;
        if (mark[c] == Mark::open) {
            auto from = std::find(path.begin(), path.end(), c);
            for (auto it = from; it != path.end(); ++it) cycle += *it + " -> ";
            cycle += c;
            return false;
        }
        mark[c] = Mark::open;
        path.push_back(c);
        if (auto it = graph.find(c); it != graph.end())
            for (const auto& d : it->second)
                if (!visit(d)) return false;
        path.pop_back();
        mark[c] = Mark::done;
        order.push_back(c);
        return true;
    };
    for (const auto& [c, deps] : graph)
        if (!visit(c)) return {};
    return order;
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

/// `pattern` with its first brace list expanded, recursively: "a.{hpp,cpp}" is a.hpp and a.cpp.
std::vector<std::string> expand_braces(const std::string& pattern) {
    const auto open = pattern.find('{');
    const auto close = open == std::string::npos ? open : pattern.find('}', open);
    if (close == std::string::npos) return {pattern};
    std::vector<std::string> out;
    std::string alternatives = pattern.substr(open + 1, close - open - 1);
    for (std::size_t from = 0;;) {
        const auto comma = alternatives.find(',', from);
        const std::string one = alternatives.substr(from, comma - from);
        for (auto& e : expand_braces(pattern.substr(0, open) + one + pattern.substr(close + 1)))
            out.push_back(std::move(e));
        if (comma == std::string::npos) break;
        from = comma + 1;
    }
    return out;
}

/// Whether `path` (relative to `root`; a `*` in its last part matches any run of characters)
/// names something that exists.
bool source_path_exists(const fs::path& root, const std::string& path) {
    const auto star = path.find('*');
    if (star == std::string::npos) return fs::exists(root / path);
    const fs::path prefix = path.substr(0, star);
    const std::string stem = prefix.filename().string(), suffix = path.substr(star + 1);
    const fs::path dir = root / prefix.parent_path();
    if (!fs::is_directory(dir)) return false;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.size() >= stem.size() + suffix.size() && name.rfind(stem, 0) == 0 &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            return true;
    }
    return false;
}

/// The `src/...` paths that a markdown text names in backticks (outside fenced blocks) and that
/// do not exist under `root`. Brace lists and a `*` are expanded; a path with a `<placeholder>`
/// names no file and is skipped.
std::vector<std::string> missing_source_paths(const std::string& markdown, const fs::path& root) {
    std::string text;
    bool fenced = false;
    std::istringstream lines(markdown);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("```", 0) == 0) {
            fenced = !fenced;
            continue;
        }
        if (!fenced) text += line + "\n";
    }
    static const std::regex span("`([^`]+)`");
    static const std::regex path(R"((?:^|[\s(])(src/[A-Za-z0-9_./{},*<>+-]*))");
    std::vector<std::string> missing;
    for (std::sregex_iterator s(text.begin(), text.end(), span), end; s != end; ++s) {
        const std::string inner = (*s)[1].str();
        for (std::sregex_iterator p(inner.begin(), inner.end(), path); p != end; ++p) {
            std::string candidate = (*p)[1].str();
            while (!candidate.empty() && (candidate.back() == '.' || candidate.back() == ','))
                candidate.pop_back();
            if (candidate.find('<') != std::string::npos) continue;
            for (const auto& one : expand_braces(candidate))
                if (!source_path_exists(root, one)) missing.push_back(one);
        }
    }
    return missing;
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

TEST_CASE("layers: the components of src/ form no cycle, and the table allows none", "[layers]") {
    const auto includes = included_components(fs::path(SKY_SOURCE_DIR) / "src");
    REQUIRE(includes.size() > 10);
    // The includes themselves: a topological order exists, so each component can be built and
    // tested with only the components below it.
    std::string cycle;
    const auto order = topological_order(includes, cycle);
    INFO("include cycle: " << cycle);
    REQUIRE(cycle.empty());
    REQUIRE(order.size() >= includes.size());
    std::map<std::string, std::size_t> level;
    for (const auto& c : order) {
        std::size_t l = 0;
        if (auto it = includes.find(c); it != includes.end())
            for (const auto& d : it->second) l = std::max(l, level.at(d) + 1);
        level[c] = l;
    }
    std::ostringstream levels;
    for (std::size_t l = 0;; ++l) {
        std::string row;
        for (const auto& [c, at] : level)
            if (at == l) row += " " + c;
        if (row.empty()) break;
        levels << "level " << l << ":" << row << "\n";
    }
    // The levels, ground floor first (shown with -s; docs/architecture.md draws them).
    INFO(levels.str());
    CHECK(level.at("util") == 0);
    CHECK(level.at("pool") < level.at("providers/descriptor"));
    CHECK(level.at("providers/local") < level.at("providers/registry"));
    CHECK(level.at("providers/registry") < level.at("cli"));
    SUCCEED(levels.str());

    // The table allows no cycle either: a new edge that would close one fails here, even before
    // an include uses it.
    std::string table_cycle;
    (void)topological_order(allowed(), table_cycle);
    INFO("cycle the table allows: " << table_cycle);
    CHECK(table_cycle.empty());
}

TEST_CASE("layers: the topological check finds a cycle and names it", "[layers]") {
    // The check above must be able to fail: a graph with a cycle has no order, and the cycle
    // found is named edge by edge.
    std::string cycle;
    const std::map<std::string, std::set<std::string>> looped = {
        {"pool", {"providers/registry", "util"}}, {"providers/registry", {"pool"}}, {"util", {}}};
    CHECK(topological_order(looped, cycle).empty());
    CHECK((cycle == "pool -> providers/registry -> pool" ||
           cycle == "providers/registry -> pool -> providers/registry"));
    cycle.clear();
    const std::map<std::string, std::set<std::string>> level = {
        {"pool", {"util"}}, {"providers/registry", {"pool"}}, {"util", {}}};
    CHECK(topological_order(level, cycle) ==
          std::vector<std::string>{"util", "pool", "providers/registry"});
    CHECK(cycle.empty());
}

TEST_CASE("layers: every src/ path the docs name in backticks exists", "[layers][docs]") {
    const fs::path root(SKY_SOURCE_DIR);
    int pages = 0;
    for (const auto& entry : fs::directory_iterator(root / "docs")) {
        if (entry.path().extension() != ".md") continue;
        ++pages;
        std::ifstream in(entry.path());
        std::stringstream text;
        text << in.rdbuf();
        for (const auto& gone : missing_source_paths(text.str(), root)) {
            INFO("docs/" << entry.path().filename().string() << " names `" << gone
                         << "`, which does not exist");
            CHECK(gone.empty());
        }
    }
    CHECK(pages > 5);
}

TEST_CASE("layers: the docs' path check finds a path that is gone and names it", "[layers][docs]") {
    // The check above must be able to fail.
    const fs::path root(SKY_SOURCE_DIR);
    const std::string page =
        "The pool (`src/pool/pool_core.cpp`, `src/pool/node_connection.{hpp,cpp}`,\n"
        "`src/io/fd_stream.*`, `src/providers/<name>/`) and `src/pool/gone.cpp` and\n"
        "`see src/nowhere/{a,b}.hpp`.\n"
        "```\n`src/in/a/fenced/block.cpp`\n```\n";
    CHECK(missing_source_paths(page, root) ==
          std::vector<std::string>{"src/pool/gone.cpp", "src/nowhere/a.hpp", "src/nowhere/b.hpp"});
    CHECK(missing_source_paths("`src/pool/pool_core.hpp` and `src/io/`", root).empty());
}
