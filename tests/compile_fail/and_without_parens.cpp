// `f() & g() >> pool` must not compile: >> binds tighter than &, so this would run g() alone
// and then try to & a PendingCompute with its int result.
#include <sky/sky.hpp>

int f() { return 1; }
int g() { return 2; }

int main() {
    sky::ComputePool pool{{}};
#ifdef SKY_COMPILE_OK
    auto t = (sky::compute<f>() & sky::compute<g>()) >> pool;
#else
    auto t = sky::compute<f>() & sky::compute<g>() >> pool;
#endif
    (void)t;
}
