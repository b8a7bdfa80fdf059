// bench/compile: what sky's public headers cost a user's build. It compiles two translation
// units with the compiler and flags this build uses, alternately, and prints the median times:
//
//   sky      a program that includes <sky/sky.hpp> and makes one call (compute<f> >> pool)
//   baseline the same program without sky: the standard headers such a program includes anyway
//            (<vector>, <string>, <map>, <functional>, <memory>, <optional>, <variant>,
//            <chrono>, <thread>, <mutex>)
//
// and the preprocessed size of each. The goal (issue 26): sky at most 2x the baseline. Each
// compile is timed twice: wall-clock, and the compiler's CPU time (user + system, from wait4):
// on a shared, loaded machine the wall clock also counts the time the compiler waited for a
// core, the CPU time much less so.
//
// Usage: compile [--runs N]   (default 5 runs of each, alternating)
#include <sys/resource.h>
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

// Runs argv with stdout to `out_file` (empty: /dev/null); returns the exit status. `cpu_s`, when
// given, gets the child's user + system time.
int run(const std::vector<std::string>& argv, const std::string& out_file = {},
        double* cpu_s = nullptr) {
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
    struct rusage ru {};
    while (::wait4(pid, &status, 0, &ru) < 0) {
    }
    if (cpu_s)
        *cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
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

struct Timing {
    double wall_s = 0;
    double cpu_s = 0;
};

Timing seconds_to_compile(const fs::path& source, const fs::path& object) {
    auto cmd = compile_command(source, "");
    cmd.insert(cmd.end(), {"-c", "-o", object.string()});
    Timing t;
    auto t0 = Clock::now();
    if (run(cmd, {}, &t.cpu_s) != 0) {
        std::fprintf(stderr, "bench/compile: the compiler failed on %s\n", source.c_str());
        std::exit(1);
    }
    t.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return t;
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
        if (a == "--runs" && i + 1 < argc)
            runs = std::max(1, std::atoi(argv[++i]));
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
    std::fflush(stdout);  // before any fork: a child would write the buffered line again
    std::vector<double> sky_wall, std_wall, sky_cpu, std_cpu;
    auto time_one = [&](const fs::path& src, const fs::path& obj, std::vector<double>& wall,
                        std::vector<double>& cpu) {
        const Timing t = seconds_to_compile(src, obj);
        wall.push_back(t.wall_s);
        cpu.push_back(t.cpu_s);
    };
    for (int r = 0; r < runs; ++r) {
        // Alternating, and each one first in turn, so that a busy moment hits both.
        if (r % 2 == 0) {
            time_one(sky_src, dir / "sky.o", sky_wall, sky_cpu);
            time_one(std_src, dir / "std.o", std_wall, std_cpu);
        } else {
            time_one(std_src, dir / "std.o", std_wall, std_cpu);
            time_one(sky_src, dir / "sky.o", sky_wall, sky_cpu);
        }
    }
    const long sky_lines = preprocessed_lines(sky_src, dir);
    const long std_lines = preprocessed_lines(std_src, dir);
    const double a = median(sky_wall), b = median(std_wall);
    const double ac = median(sky_cpu), bc = median(std_cpu);
    std::printf(
        "\n| translation unit | wall, median of %d (s) | CPU, median of %d (s) | "
        "preprocessed lines |\n",
        runs, runs);
    std::printf("|---|---|---|---|\n");
    std::printf("| <sky/sky.hpp> + one call | %.2f | %.2f | %ld |\n", a, ac, sky_lines);
    std::printf("| baseline: the standard headers alone | %.2f | %.2f | %ld |\n", b, bc, std_lines);
    std::printf(
        "| ratio (goal <= 2x) | %.2fx | %.2fx | %.2fx |\n", a / b, ac / bc,
        std_lines > 0 ? static_cast<double>(sky_lines) / static_cast<double>(std_lines) : 0.0);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
