// sky::map needs a sized range (it cuts it into chunks), and F(element, fixed...) must be a
// valid call: an unsized view, or a missing fixed argument, does not compile.
#include <ranges>
#include <sky/sky.hpp>
#include <vector>

int scaled(int x, int k) { return k * x; }

int main() {
    std::vector<int> xs{1, 2, 3};
    auto odd = xs | std::views::filter([](int x) { return x % 2 == 1; });
#ifdef SKY_COMPILE_OK
    auto m = sky::map<scaled>(xs, 3);
    auto n = sky::map<scaled>(std::views::iota(0, 3), 3);
    (void)odd;
    (void)n;
#else
    auto m = sky::map<scaled>(odd, 3);
    auto n = sky::map<scaled>(xs);
    (void)n;
#endif
    (void)m;
}
