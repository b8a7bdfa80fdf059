// A pool whose workers seal their streams (runtime/auth.hpp, io/sealed.hpp), on Local with
// SKY_LOCAL_SEAL=1: the same code a Slurm pool runs on the cluster network, here on a socket
// pair. Calls, large arguments and results, broadcasts and many calls at once all cross sealed
// records; a worker killed mid-call is a lost node as on a plain stream.
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

namespace sealed_pool {
int twice(int x) { return 2 * x; }
std::vector<std::int64_t> sealed_echo(std::vector<std::int64_t> v) { return v; }
std::string sealed_reverse(std::string s) { return {s.rbegin(), s.rend()}; }
}  // namespace sealed_pool

using namespace sealed_pool;

TEST_CASE("sealed Local pool: calls, large arguments and results, a broadcast", "[local][seal]") {
    sky::test::ScopedEnv seal(
        std::vector<std::pair<std::string, std::string>>{{"SKY_LOCAL_SEAL", "1"}});
    std::vector<std::string> said;
    sky::ComputePool pool{{.nodes = 2, .display = sky::Display::quiet}};
    CHECK((sky::compute<twice>(21) >> pool) == 42);
    CHECK((sky::compute<sealed_reverse>(std::string("sealed")) >> pool) == "delaes");
    std::vector<std::int64_t> big(9u << 20 >> 3);  // 9 MiB: records of 256 KiB, many reads
    std::iota(big.begin(), big.end(), 7);
    CHECK((sky::compute<sealed_echo>(big) >> pool) == big);
    std::vector<sky::PendingCompute<int>> many;
    for (int i = 0; i < 200; ++i) many.push_back(sky::compute<twice>(i));
    const auto r = sky::gather(std::move(many)) >> pool;
    for (int i = 0; i < 200; ++i) CHECK(r[static_cast<std::size_t>(i)] == 2 * i);
    CHECK((sky::compute<twice>(1) | pool) == std::vector<int>{2, 2});
}
