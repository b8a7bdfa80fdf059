// A map runs its elements once each over the pool; there is no broadcast of a map: `|` must
// not compile (the operators are hidden friends of the types they apply to).
#include <sky/sky.hpp>
#include <vector>

int twice(int x) { return 2 * x; }

int main() {
    sky::ComputePool pool{{}};
    std::vector<int> xs{1, 2, 3};
#ifdef SKY_COMPILE_OK
    std::vector<int> r = sky::map<twice>(xs) >> pool;
#else
    auto r = sky::map<twice>(xs) | pool;
#endif
    (void)r;
}
