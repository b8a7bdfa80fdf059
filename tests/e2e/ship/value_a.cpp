// Variant A of a program's own library (soname libshipvalue.so).
extern "C" int ship_value() { return 1; }
