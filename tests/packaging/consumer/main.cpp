// A tiny program that uses sky the way a user does, built against an installed sky
// (find_package) or a source tree (add_subdirectory).
#include <cstdio>
#include <sky/sky.hpp>

namespace consumer {
int square(int x) { return x * x; }
}  // namespace consumer

int main(int argc, char** argv) {
    sky::init(argc, argv);
    sky::ComputePool pool{{.nodes = 2, .display = sky::Display::quiet}};
    auto squares =
        sky::gather(sky::compute<consumer::square>(3), sky::compute<consumer::square>(4)) >> pool;
    int sum = std::get<0>(squares) + std::get<1>(squares);
    std::printf("consumer: 3^2 + 4^2 = %d\n", sum);
    return sum == 25 ? 0 : 1;
}
