// Typed parallel batches (seed 003: `a, b, c = (fn1() & fn2() & fn3()) >> pool`, "full type
// inference", and the five-way `(f1() & ... & f5()) >> pool`). Each member of a batch keeps its own
// result type: the batch returns a std::tuple, so structured bindings give an int, a double, a
// std::string, a user type, and std::monostate for a function that returns void. The members run in
// parallel; if one throws, the others still finish and then the first failure is rethrown.
//
//   example_batches                                     # 2 worker processes on this machine
//   example_batches --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <algorithm>
#include <example_provider.hpp>
#include <iostream>
#include <numeric>
#include <sky/sky.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace text {

// Any type cereal can serialize can be an argument or a result.
struct Summary {
    double min = 0;
    double max = 0;
    std::size_t n = 0;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(min, max, n);
    }
};

int count_words(std::string s) {
    std::istringstream in(s);
    int n = 0;
    for (std::string w; in >> w;) ++n;
    return n;
}

double mean(std::vector<double> xs) {
    return std::reduce(xs.begin(), xs.end()) / static_cast<double>(xs.size());
}

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
    return s;
}

Summary summarize(std::vector<double> xs) {
    auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
    return {*lo, *hi, xs.size()};
}

void warm_up() { std::cout << "warmed up" << std::endl; }

int must_be_positive(int x) {
    if (x <= 0) throw std::domain_error("expected a positive number, got " + std::to_string(x));
    return x;
}

}  // namespace text

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2),
                               .concurrency = 3}};

        const std::vector<double> xs{4, 8, 15, 16, 23, 42};
        auto [words, avg, shout, summary, nothing] =
            (sky::compute<text::count_words>(std::string("the quick brown fox jumps")) &
             sky::compute<text::mean>(xs) & sky::compute<text::upper>(std::string("sky")) &
             sky::compute<text::summarize>(xs) & sky::compute<text::warm_up>()) >>
            pool;

        // The types are checked by the compiler, not at run time.
        static_assert(std::is_same_v<decltype(words), int>);
        static_assert(std::is_same_v<decltype(avg), double>);
        static_assert(std::is_same_v<decltype(shout), std::string>);
        static_assert(std::is_same_v<decltype(summary), text::Summary>);
        static_assert(std::is_same_v<decltype(nothing), std::monostate>);

        std::cout << "words = " << words << "\n";
        std::cout << "mean = " << avg << "\n";
        std::cout << "upper = " << shout << "\n";
        std::cout << "summary = min " << summary.min << ", max " << summary.max << ", n "
                  << summary.n << "\n";
        std::cout << "warm_up returned void (std::monostate in the tuple)\n";

        // sky::gather(a, b, ...) is the same batch written as a call.
        auto [p, q] = sky::gather(sky::compute<text::must_be_positive>(3),
                                  sky::compute<text::count_words>(std::string("a b"))) >>
                      pool;
        std::cout << "gather = " << p << ", " << q << "\n";

        // One member fails: the batch waits for the others, then rethrows the first failure with
        // the remote exception's type and message.
        try {
            auto [ok, bad] =
                (sky::compute<text::mean>(xs) & sky::compute<text::must_be_positive>(-5)) >> pool;
            std::cout << "unexpected: " << ok << ", " << bad << "\n";
            return 1;
        } catch (const sky::RemoteError& e) {
            std::cout << "batch failed in " << e.function() << ": " << e.type_name() << ": "
                      << e.message() << "\n";
        }
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
