// Structural rules of src/ beside the layers: what runs on a node is shell in .sh files (or the
// launcher, C++), never a program assembled in C++ strings; the marks a node prints are defined
// in one header; shipping and volumes reach a node through its shell, never through SSH itself.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool is_cpp(const fs::path& p) {
    const auto e = p.extension().string();
    return e == ".cpp" || e == ".hpp" || e == ".h" || e == ".cc";
}

std::vector<fs::path> files_under(const fs::path& dir, bool cpp_only) {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && (!cpp_only || is_cpp(e.path()))) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// C++ source without its comments (string literals kept, with their quotes).
std::string without_comments(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '"' || s[i] == '\'') {
            // A raw string: R"d( ... )d".
            if (s[i] == '"' && i > 0 && s[i - 1] == 'R') {
                const auto open = s.find('(', i);
                const std::string delim = ")" + s.substr(i + 1, open - i - 1) + "\"";
                const auto close = s.find(delim, open);
                const auto end = close == std::string::npos ? s.size() : close + delim.size();
                out.append(s, i, end - i);
                i = end - 1;
                continue;
            }
            const char q = s[i];
            out += s[i];
            for (++i; i < s.size() && s[i] != q && s[i] != '\n'; ++i) {
                out += s[i];
                if (s[i] == '\\' && i + 1 < s.size()) out += s[++i];
            }
            if (i < s.size()) out += s[i];
        } else if (s.compare(i, 2, "//") == 0) {
            while (i < s.size() && s[i] != '\n') ++i;
            if (i < s.size()) out += '\n';
        } else if (s.compare(i, 2, "/*") == 0) {
            const auto end = s.find("*/", i + 2);
            for (std::size_t k = i; k < (end == std::string::npos ? s.size() : end + 2); ++k)
                if (s[k] == '\n') out += '\n';
            i = end == std::string::npos ? s.size() : end + 1;
        } else {
            out += s[i];
        }
    }
    return out;
}

// One C++ string as the compiler joins it: adjacent literals ("a" "b"), and the line it
// starts on.
struct JoinedLiteral {
    std::string text;  // as written, escapes not decoded
    int line = 0;
};

std::vector<JoinedLiteral> joined_literals(const std::string& code) {
    std::vector<JoinedLiteral> out;
    static const std::regex lit(R"re("((?:[^"\\\n]|\\.)*)")re");
    std::size_t last_end = std::string::npos;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), lit);
         it != std::sregex_iterator(); ++it) {
        const auto at = static_cast<std::size_t>(it->position(0));
        // A character literal's quote ('"') is no string.
        if (at > 0 && code[at - 1] == '\'') continue;
        const bool adjacent =
            last_end != std::string::npos && code.find_first_not_of(" \t\r\n", last_end) == at;
        if (adjacent && !out.empty()) {
            out.back().text += (*it)[1].str();
        } else {
            const int line = 1 + static_cast<int>(std::count(
                                     code.begin(), code.begin() + static_cast<long>(at), '\n'));
            out.push_back({(*it)[1].str(), line});
        }
        last_end = at + static_cast<std::size_t>(it->length(0));
    }
    return out;
}

std::size_t count_of(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
    return n;
}

// The rule: a string that reads as shell (it has shell's syntax: an expansion, a redirection to
// /dev/null, a test, a loop or a condition, a shebang) is a shell program of as many lines as it
// has statement ends ("\n", "; ", "&& ", "|| "). More than this many is more than a few lines:
// it belongs in a .sh file (embedded by sky_embed_scripts, checked by shellcheck).
constexpr std::size_t kFewShellLines = 6;

std::size_t shell_lines(const std::string& text) {
    static const std::vector<std::string> shell_syntax = {"$(",        "${",      "\\\"$", " \"$",
                                                          "/dev/null", "; then",  "; do",  "[ -",
                                                          "#!/",       "|| true", "exit ", "2>&1"};
    bool shell = false;
    for (const auto& s : shell_syntax) shell = shell || text.find(s) != std::string::npos;
    if (!shell) return 0;
    return count_of(text, "\\n") + count_of(text, "; ") + count_of(text, "&& ") +
           count_of(text, "|| ");
}

// The longest shell program each C++ file of `src` assembles, for those over the rule.
std::map<std::string, std::size_t> shell_programs(const fs::path& src,
                                                  std::map<std::string, int>& where) {
    std::map<std::string, std::size_t> out;
    for (const auto& p : files_under(src, true)) {
        const auto rel = fs::relative(p, src.parent_path()).generic_string();
        for (const auto& l : joined_literals(without_comments(read_all(p)))) {
            const auto n = shell_lines(l.text);
            if (n > kFewShellLines && n > out[rel]) {
                out[rel] = n;
                where[rel] = l.line;
            }
        }
    }
    for (auto it = out.begin(); it != out.end();) it = it->second == 0 ? out.erase(it) : ++it;
    return out;
}

// C++ source without its comments and with every string and character literal emptied (its
// quotes kept): what is left is code, names and all.
std::string code_only(const std::string& s) {
    const std::string c = without_comments(s);
    std::string out;
    out.reserve(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) {
        if (c[i] == '"' && i > 0 && c[i - 1] == 'R') {
            const auto open = c.find('(', i);
            const std::string delim = ")" + c.substr(i + 1, open - i - 1) + "\"";
            const auto close = c.find(delim, open);
            out += "\"\"";
            i = close == std::string::npos ? c.size() : close + delim.size() - 1;
        } else if (c[i] == '"' || c[i] == '\'') {
            const char q = c[i];
            out += q;
            for (++i; i < c.size() && c[i] != q && c[i] != '\n'; ++i)
                if (c[i] == '\\') ++i;
            out += q;
        } else {
            out += c[i];
        }
    }
    return out;
}

// The provider configuration types: the alternatives of sky::Provider::Config
// (include/sky/providers.hpp), read from the header so that a provider added there is checked.
std::vector<std::string> provider_types() {
    const std::string h =
        code_only(read_all(fs::path(SKY_SOURCE_DIR) / "include" / "sky" / "providers.hpp"));
    static const std::regex config(R"re(using\s+Config\s*=\s*std::variant<([^>]*)>)re");
    std::smatch m;
    std::vector<std::string> out;
    if (!std::regex_search(h, m, config)) return out;
    static const std::regex name(R"re([A-Za-z_][A-Za-z_0-9]*)re");
    const std::string list = m[1].str();
    for (auto it = std::sregex_iterator(list.begin(), list.end(), name);
         it != std::sregex_iterator(); ++it)
        out.push_back(it->str());
    return out;
}

}  // namespace

TEST_CASE("structure: no ::sky- mark outside the one header that defines the marks",
          "[structure]") {
    const fs::path src = fs::path(SKY_SOURCE_DIR) / "src";
    const auto home = (src / "runtime" / "node_marks.hpp").lexically_normal();
    REQUIRE(fs::exists(home));
    std::vector<std::string> found;
    for (const auto& p : files_under(src, false)) {
        if (p.lexically_normal() == home) continue;
        std::istringstream is(read_all(p));
        int n = 0;
        for (std::string l; std::getline(is, l);)
            if (++n, l.find("::sky-") != std::string::npos)
                found.push_back(fs::relative(p, src).generic_string() + ":" + std::to_string(n) +
                                ": " + l);
    }
    INFO([&] {
        std::string s;
        for (const auto& f : found) s += f + "\n";
        return s;
    }());
    CHECK(found.empty());
}

TEST_CASE("structure: src/ship and src/volumes include nothing of src/ssh", "[structure]") {
    const fs::path src = fs::path(SKY_SOURCE_DIR) / "src";
    static const std::regex include(R"re(#\s*include\s*[<"]ssh/)re");
    std::vector<std::string> found;
    for (const char* dir : {"ship", "volumes"})
        for (const auto& p : files_under(src / dir, false)) {
            std::istringstream is(read_all(p));
            for (std::string l; std::getline(is, l);)
                if (std::regex_search(l, include))
                    found.push_back(fs::relative(p, src).generic_string() + ": " + l);
        }
    INFO(found.size() << " include(s), the first: " << (found.empty() ? "" : found.front()));
    CHECK(found.empty());
}

TEST_CASE("structure: the shell check finds a shell program assembled in C++, and not prose",
          "[structure]") {
    const std::string code = R"cpp(
        // "a comment with $(x); y; z; w; v; u; t; s" is no code
        auto s = fmt::format(
            "umask 077; cd {} || exit 1; "
            "for i in $(seq 10); do [ -s port ] && break; sleep 0.1; done; "
            "cat port; rm -f port; exit 0",
            dir);
        auto usage = "usage: sky ls\n\nThe pools.\n  --all  every pool\n  --x  y\n  a\n  b\n";
    )cpp";
    const auto literals = joined_literals(without_comments(code));
    REQUIRE(literals.size() == 2);
    CHECK(literals[0].line == 4);
    CHECK(shell_lines(literals[0].text) > kFewShellLines);
    CHECK(shell_lines(literals[1].text) == 0);
    CHECK(shell_lines("uname -m; echo \\\"$HOME\\\"") <= kFewShellLines);
}

TEST_CASE("structure: no C++ source in src/ assembles more than a few lines of shell",
          "[structure]") {
    // Shell that runs on a node lives in .sh files (sky_embed_scripts), its values written in
    // front of it (node/scripts.hpp's ScriptValues); no file is excepted.
    std::map<std::string, int> where;
    const auto found = shell_programs(fs::path(SKY_SOURCE_DIR) / "src", where);
    for (const auto& [file, lines] : found) {
        INFO(file << ":" << where[file] << " assembles a shell program of " << lines
                  << " lines (the rule allows " << kFewShellLines << ")");
        FAIL_CHECK("a shell program in C++: move it into a .sh file");
    }
    CHECK(found.empty());
}

TEST_CASE("structure: src/pool and src/catalog name no provider type", "[structure]") {
    // What differs by provider (exposure, billing, whether nodes run here) is the provider's own
    // descriptor's to say; the pool and the catalog ask it, and never switch on a type.
    const auto types = provider_types();
    REQUIRE(types.size() >= 10);  // the header's variant was found and read
    CHECK(std::find(types.begin(), types.end(), "Kubernetes") != types.end());
    std::string alternation;
    for (const auto& t : types) alternation += (alternation.empty() ? "" : "|") + t;
    const std::regex named("(^|[^A-Za-z_0-9:]|sky::)(" + alternation + ")\\b");
    std::vector<std::string> found;
    const fs::path src = fs::path(SKY_SOURCE_DIR) / "src";
    for (const char* dir : {"pool", "catalog"})
        for (const auto& p : files_under(src / dir, true)) {
            std::istringstream is(code_only(read_all(p)));
            int n = 0;
            for (std::string l; std::getline(is, l);)
                if (++n, std::regex_search(l, named))
                    found.push_back(fs::relative(p, src).generic_string() + ":" +
                                    std::to_string(n) + ": " + l);
        }
    INFO([&] {
        std::string s;
        for (const auto& f : found) s += f + "\n";
        return s;
    }());
    CHECK(found.empty());
}

TEST_CASE("structure: the provider-type check finds a named type, and not one in a string",
          "[structure]") {
    const std::string code =
        "// sky::Slurm in a comment\nauto a = \"Slurm\";\nif (std::holds_alternative<Slurm>(c)) "
        "{}\n";
    const auto only = code_only(code);
    CHECK(only.find("comment") == std::string::npos);
    CHECK(only.find("\"Slurm\"") == std::string::npos);
    CHECK(only.find("holds_alternative<Slurm>") != std::string::npos);
}

TEST_CASE("structure: the public headers use no libstdc++ internals and no cereal::detail",
          "[structure]") {
    // A program written from the API compiles on any standard library, and sky's archive is its
    // own (sky::class_version<T>), not cereal's internals.
    static const std::regex bits(R"re(#\s*include\s*[<"]bits/)re");
    std::vector<std::string> found;
    const fs::path include = fs::path(SKY_SOURCE_DIR) / "include";
    for (const auto& p : files_under(include, false)) {
        std::istringstream is(without_comments(read_all(p)));
        int n = 0;
        for (std::string l; std::getline(is, l);)
            if (++n, std::regex_search(l, bits) || l.find("cereal::detail") != std::string::npos)
                found.push_back(fs::relative(p, include).generic_string() + ":" +
                                std::to_string(n) + ": " + l);
    }
    INFO(found.size() << " use(s), the first: " << (found.empty() ? "" : found.front()));
    CHECK(found.empty());
}
