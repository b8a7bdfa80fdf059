#pragma once
// Functions the e2e tests run remotely, and small helpers.
#include <chrono>
#include <string>
#include <vector>

#include "sky/sky.hpp"

namespace e2e {

struct Vec3 {
    double x = 0, y = 0, z = 0;
    template <class A>
    void serialize(A& ar) {
        ar(x, y, z);
    }
    bool operator==(const Vec3&) const = default;
};

int add(int a, int b);
double mean(std::vector<double> xs);
std::string concat(std::string a, const std::string& b, int times);
Vec3 scale(Vec3 v, double k);
std::vector<float> echo(std::vector<float> v);
void nothing();
int node_index();
sky::InstanceInfo info();
std::string getenv_of(std::string name);
int say_and_return(int n);
int printf_lines(int n);
int throw_invalid(int x);
int throw_custom(int x);
int throw_int(int x);
int crash_abort(int x);
int crash_segv(int x);
int sleep_ms(int ms);
int rendezvous(std::string dir, std::string me, std::string other);
long pid();
int fail_on_node(int node);

int orphan_client(const char* pid_file);

/// Live child processes of this test process (the pools' workers); zombies do not count.
int live_children();

/// A pool spec with nothing displayed.
inline sky::PoolSpec quiet(int nodes, int concurrency = 1) {
    return {.nodes = nodes, .concurrency = concurrency, .display = sky::Display::quiet};
}

/// A unique scratch directory under /tmp, removed by the destructor.
struct TempDir {
    std::string path;
    TempDir();
    ~TempDir();
};

}  // namespace e2e

namespace e2e {
std::string by_ref(const std::string& a, std::vector<int>& b, std::string&& c);
}  // namespace e2e
