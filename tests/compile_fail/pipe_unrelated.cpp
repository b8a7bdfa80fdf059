// The operators are constrained hidden friends: they never apply to unrelated types.
#include <sky/sky.hpp>

int f() { return 1; }

struct NotAPool {};

int main() {
    NotAPool np;
#ifdef SKY_COMPILE_OK
    sky::ComputePool pool{{}};
    int r = sky::compute<f>() >> pool;
#else
    int r = sky::compute<f>() >> np;
#endif
    (void)r;
    (void)np;
}
