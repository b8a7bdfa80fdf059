// An argument type that cannot be serialized is a compile-time error that names the type.
#include <sky/sky.hpp>

struct Handle {
    int* raw = nullptr;  // no serialize(): cannot travel
#ifdef SKY_COMPILE_OK
    template <class A>
    void serialize(A& ar) {
        ar(reinterpret_cast<std::uintptr_t&>(raw));
    }
#endif
};

int use(Handle h) { return h.raw ? 1 : 0; }

int main() {
    auto p = sky::compute<use>(Handle{});
    (void)p;
}
