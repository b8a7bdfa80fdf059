#include "e2e/local/functions.hpp"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/proc_file.hpp"

namespace e2e {

// Live child processes of this test process (the pools' workers); zombies do not count.
int live_children() { return sky::test::count_children(/*zombies=*/false); }

int add(int a, int b) { return a + b; }
double mean(std::vector<double> xs) {
    return std::reduce(xs.begin(), xs.end()) / static_cast<double>(xs.size());
}
std::string concat(std::string a, const std::string& b, int times) {
    std::string s;
    for (int i = 0; i < times; ++i) s += a + b;
    return s;
}
Vec3 scale(Vec3 v, double k) { return {v.x * k, v.y * k, v.z * k}; }
std::vector<float> echo(std::vector<float> v) { return v; }
void nothing() {}
int node_index() { return sky::instance_info().node; }
sky::InstanceInfo info() { return sky::instance_info(); }
std::string getenv_of(std::string name) {
    const char* v = std::getenv(name.c_str());
    return v ? v : "<unset>";
}
int say_and_return(int n) {
    for (int i = 0; i < n; ++i) std::cout << "line " << i << std::endl;
    std::cerr << "to stderr" << std::endl;
    return n;
}
int printf_lines(int n) {
    for (int i = 0; i < n; ++i) std::printf("printf %d\n", i);
    return n;
}
int throw_invalid(int x) {
    std::cout << "about to fail with " << x << std::endl;
    throw std::invalid_argument("bad x: " + std::to_string(x));
}
struct CustomError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
int throw_custom(int) { throw CustomError("custom failure"); }
int throw_int(int x) { throw x; }
int crash_abort(int) {
    std::cout << "going down" << std::endl;
    std::abort();
}
int crash_segv(int) {
    ::raise(SIGSEGV);
    return 0;
}
int sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
}
// Succeeds only if another call creates `other` while this one waits: proves two calls run at
// once on one node.
int rendezvous(std::string dir, std::string me, std::string other) {
    std::ofstream(dir + "/" + me) << "x";
    for (int i = 0; i < 1000; ++i) {
        struct stat st;
        if (::stat((dir + "/" + other).c_str(), &st) == 0) return static_cast<int>(::gettid());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("the other call never ran at the same time");
}
long pid() { return static_cast<long>(::getpid()); }
int fail_on_node(int node) {
    if (sky::instance_info().node == node) std::abort();
    return sky::instance_info().node;
}

int orphan_client(const char* pid_file) {
    sky::ComputePool pool{{.nodes = 2, .display = sky::Display::quiet}};
    std::vector<long> pids = sky::compute<pid>() | pool;
    {
        std::ofstream f(std::string(pid_file) + ".tmp");
        for (long p : pids) f << p << "\n";
    }
    std::rename((std::string(pid_file) + ".tmp").c_str(), pid_file);
    std::this_thread::sleep_for(std::chrono::seconds(60));  // killed before this ends
    return 0;
}

TempDir::TempDir() {
    char t[] = "/tmp/sky-e2e-XXXXXX";
    path = ::mkdtemp(t);
}
TempDir::~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }

}  // namespace e2e

namespace e2e {
std::string by_ref(const std::string& a, std::vector<int>& b, std::string&& c) {
    b.push_back(1);
    return a + std::to_string(b.size()) + c;
}
}  // namespace e2e
