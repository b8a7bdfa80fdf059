// The four ways to send work to a pool (seeds 000, 001, 002: `>>`, `@`, `&`, `gather()`), and the
// pool methods behind them. In C++ the seeds' broadcast `@` is `|`, and a `&` batch needs
// parentheses: `(f() & g()) >> pool` (C++ gives `>>` the higher precedence; without them the
// program does not compile).
//
//   example_operators                                   # 2 worker processes on this machine
//   example_operators --provider ssh --hosts A,B --identity KEY --known-hosts FILE
//   example_operators --provider aws                    # 2 EC2 instances (credentials from env)
#include <example_provider.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace ops {

int square(int x) { return x * x; }

int add(int a, int b) { return a + b; }

// Which node ran the call: a broadcast runs it once on every node, in node order.
int node_id() { return sky::instance_info().node; }

}  // namespace ops

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2),
                               .concurrency = 2}};
        std::cout << "pool active: " << std::boolalpha << pool.is_active()
                  << ", instances: " << pool.instance_count() << "\n";

        // Calling the function only binds its arguments; nothing runs until the pool gets it.
        sky::PendingCompute<int> pending = sky::compute<ops::add>(1, 2);

        // >>: run once, on one worker.
        int one = sky::compute<ops::square>(7) >> pool;
        std::cout << "square(7) >> pool = " << one << "\n";
        std::cout << "add(1, 2) >> pool = " << (pending >> pool) << "\n";

        // |: broadcast, once on every node; results in node order.
        std::vector<int> ids = sky::compute<ops::node_id>() | pool;
        std::cout << "node_id() | pool  =";
        for (int id : ids) std::cout << " " << id;
        std::cout << "\n";

        // &: in parallel, each result with its own type.
        auto [a, b] = (sky::compute<ops::square>(3) & sky::compute<ops::add>(20, 22)) >> pool;
        std::cout << "(square(3) & add(20, 22)) >> pool = " << a << ", " << b << "\n";

        // gather(): the same as &, written as a call.
        auto [x, y, z] = sky::gather(sky::compute<ops::square>(1), sky::compute<ops::square>(2),
                                     sky::compute<ops::square>(3)) >>
                         pool;
        std::cout << "gather(square(1), square(2), square(3)) >> pool = " << x << ", " << y << ", "
                  << z << "\n";

        // The methods behind the operators, and submit() to get a Future and carry on.
        int r = pool.run(sky::compute<ops::square>(5));
        auto [c, d] = pool.run_batch(sky::compute<ops::add>(1, 1) & sky::compute<ops::add>(2, 2));
        std::vector<int> again = pool.broadcast(sky::compute<ops::node_id>());
        sky::Future<int> later = pool.submit(sky::compute<ops::square>(12));
        std::cout << "run = " << r << ", run_batch = " << c << ", " << d
                  << ", broadcast answered by " << again.size()
                  << " nodes, submit(...).get() = " << later.get() << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;  // the pool was torn down when it left its scope
}
