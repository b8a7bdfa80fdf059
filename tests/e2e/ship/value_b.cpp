// Variant B of the same library: a new build that changes only the library.
extern "C" int ship_value() { return 2; }
