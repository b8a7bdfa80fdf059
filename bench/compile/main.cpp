// bench/compile: what sky's public headers cost a user's build. It compiles two translation
// units with the compiler and flags this build uses, alternately, and prints the median times:
//
//   sky      a program that includes <sky/sky.hpp> and makes one call (compute<f> >> pool)
//   baseline the same program without sky: the standard headers such a program includes anyway
//            (<vector>, <string>, <map>, <functional>, <memory>, <optional>, <variant>,
//            <chrono>, <thread>, <mutex>)
//
// and the preprocessed size of each. The goal (issue 26): sky at most 2x the baseline.
//
// Usage: compile [--runs N]   (default 5 runs of each, alternating)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* const sky_tu = R"(#include <sky/sky.hpp>

double mean(std::vector<double> xs) {
    double s = 0;
    for (double x : xs) s += x;
    return xs.empty() ? 0 : s / static_cast<double>(xs.size());
}

int main(int argc, char** argv) {
    sky::init(argc, argv);
    sky::ComputePool pool{{.provider = sky::Local{}, .nodes = 1}};
    double m = sky::compute<mean>(std::vector<double>{1, 2, 3}) >> pool;
    return m == 2 ? 0 : 1;
}
)";

const char* const std_tu = R"(#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

double mean(std::vector<double> xs) {
    double s = 0;
    for (double x : xs) s += x;
    return xs.empty() ? 0 : s / static_cast<double>(xs.size());
}

int main(int, char**) {
    double m = mean(std::vector<double>{1, 2, 3});
    return m == 2 ? 0 : 1;
}
)";

std::vector<std::string> split_flags(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// Runs argv with stdout to `out_file` (empty: /dev/null); returns the exit status.
int run(const std::vector<std::string>& argv, const std::string& out_file = {}) {
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        std::string out = out_file.empty() ? "/dev/null" : out_file;
        if (!std::freopen(out.c_str(), "w", stdout)) ::_exit(127);
        std::vector<char*> args;
        for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::vector<std::string> compile_command(const fs::path& source, const std::string& extra) {
    std::vector<std::string> cmd{SKY_BENCH_CXX};
    for (auto& f : split_flags(SKY_BENCH_CXX_FLAGS)) cmd.push_back(f);
    for (auto& f : split_flags(extra)) cmd.push_back(f);
    cmd.push_back("-std=c++20");
    cmd.push_back("-I" SKY_BENCH_INCLUDE);
    cmd.push_back(source.string());
    return cmd;
}

double seconds_to_compile(const fs::path& source, const fs::path& object) {
    auto cmd = compile_command(source, "");
    cmd.insert(cmd.end(), {"-c", "-o", object.string()});
    auto t0 = Clock::now();
    if (run(cmd) != 0) {
        std::fprintf(stderr, "bench/compile: the compiler failed on %s\n", source.c_str());
        std::exit(1);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

long preprocessed_lines(const fs::path& source, const fs::path& dir) {
    auto cmd = compile_command(source, "");
    cmd.push_back("-E");
    const fs::path out = dir / "pre.i";
    if (run(cmd, out.string()) != 0) return -1;
    std::ifstream in(out);
    long n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 5;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: compile [--runs N]\n");
            return 2;
        }
    }
    char tmpl[] = "/tmp/sky-bench-compile-XXXXXX";
    if (!::mkdtemp(tmpl)) return 1;
    const fs::path dir = tmpl;
    const fs::path sky_src = dir / "sky_tu.cpp", std_src = dir / "std_tu.cpp";
    std::ofstream(sky_src) << sky_tu;
    std::ofstream(std_src) << std_tu;

    std::printf("compiler: %s %s -std=c++20\n", SKY_BENCH_CXX, SKY_BENCH_CXX_FLAGS);
    std::vector<double> sky_s, std_s;
    for (int r = 0; r < runs; ++r) {
        // Alternating, and each one first in turn, so that a busy moment hits both.
        if (r % 2 == 0) {
            sky_s.push_back(seconds_to_compile(sky_src, dir / "sky.o"));
            std_s.push_back(seconds_to_compile(std_src, dir / "std.o"));
        } else {
            std_s.push_back(seconds_to_compile(std_src, dir / "std.o"));
            sky_s.push_back(seconds_to_compile(sky_src, dir / "sky.o"));
        }
    }
    const long sky_lines = preprocessed_lines(sky_src, dir);
    const long std_lines = preprocessed_lines(std_src, dir);
    const double a = median(sky_s), b = median(std_s);
    std::printf("\n| translation unit | compile, median of %d (s) | preprocessed lines |\n", runs);
    std::printf("|---|---|---|\n");
    std::printf("| <sky/sky.hpp> + one call | %.2f | %ld |\n", a, sky_lines);
    std::printf("| baseline: the standard headers alone | %.2f | %ld |\n", b, std_lines);
    std::printf("| ratio (goal <= 2x) | %.2fx | %.2fx |\n", a / b,
                std_lines > 0 ? static_cast<double>(sky_lines) / static_cast<double>(std_lines)
                              : 0.0);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
