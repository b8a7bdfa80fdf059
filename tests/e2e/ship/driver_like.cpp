// A library named like a GPU driver library: sky never ships those (the node's own must match
// its kernel driver), so a program that needs it cannot start on a node without it.
extern "C" int driver_like_value() { return 7; }
