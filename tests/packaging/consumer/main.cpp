// A tiny program that uses sky the way a user does, built against an installed sky
// (find_package) or a source tree (add_subdirectory).
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <cstdio>
#include <sky/asio.hpp>
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
    // sky/asio.hpp through the package: Boost comes with it (find_dependency).
    auto five = sky::async_run(pool, sky::compute<consumer::square>(5), boost::asio::use_future);
    const int twenty_five = five.get();
    std::printf("consumer: 3^2 + 4^2 = %d, async 5^2 = %d\n", sum, twenty_five);
    return sum == 25 && twenty_five == 25 ? 0 : 1;
}
