// The registry: automatic registration under the qualified name and a signature hash.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sky/compute.hpp"
#include "sky/detail/registry.hpp"

namespace stats {
double mean(std::vector<double> xs) {
    double s = 0;
    for (double x : xs) s += x;
    return xs.empty() ? 0 : s / static_cast<double>(xs.size());
}
struct Tools {
    static int twice(int x) { return 2 * x; }
};
}  // namespace stats
int overloaded(int x) { return x; }
int overloaded(double x) { return static_cast<int>(x * 10); }

TEST_CASE("functions register under their qualified names", "[registry]") {
    // Using sky::compute<F> anywhere in the program registers F before main.
    (void)sky::compute<stats::mean>(std::vector<double>{});
    (void)sky::compute<&stats::Tools::twice>(1);
    (void)sky::compute<static_cast<int (*)(int)>(overloaded)>(1);
    (void)sky::compute<static_cast<int (*)(double)>(overloaded)>(1.0);
    CHECK(sky::compute<stats::mean>.name() == "stats::mean");
    CHECK(sky::compute<&stats::Tools::twice>.name() == "stats::Tools::twice");

    auto all = sky::registered_functions();
    auto has = [&](const std::string& n) {
        return std::count_if(all.begin(), all.end(), [&](auto& f) { return f.name == n; });
    };
    CHECK(has("stats::mean") == 1);
    CHECK(has("stats::Tools::twice") == 1);
    CHECK(has("overloaded") == 2);  // two signatures, one name
    for (auto& f : all)
        if (f.name == "stats::mean") CHECK(f.signature.find("double") != std::string::npos);
}

TEST_CASE("lookup by name and signature", "[registry]") {
    (void)sky::compute<stats::mean>(std::vector<double>{});
    auto sig = sky::compute<stats::mean>.signature_hash();
    auto ok = sky::detail::find_function("stats::mean", sig);
    REQUIRE(ok.entry);
    auto wrong_sig = sky::detail::find_function("stats::mean", sig + 1);
    CHECK_FALSE(wrong_sig.entry);
    CHECK(wrong_sig.name_known);
    auto unknown = sky::detail::find_function("no::such", sig);
    CHECK_FALSE(unknown.entry);
    CHECK_FALSE(unknown.name_known);

    // Invoke through the registry, as a worker does.
    sky::detail::Buffer args, out;
    sky::detail::save_to(args, std::vector<double>{1, 2, 3, 6});
    ok.entry->invoke(args.span(), out);
    double r = 0;
    sky::detail::load_from(out.span(), r);
    CHECK(r == 3.0);
}

TEST_CASE("signature hashes differ between signatures", "[registry]") {
    CHECK(sky::compute<static_cast<int (*)(int)>(overloaded)>.signature_hash() !=
          sky::compute<static_cast<int (*)(double)>(overloaded)>.signature_hash());
}
