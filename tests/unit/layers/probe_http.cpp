// Compiled as a source of the http component (with its include path, tests/unit/layers): what
// http links compiles; a header of the runtime, which http does not link, is not found.
#include "http/http_client.hpp"
#include "util/text.hpp"
#ifndef SKY_COMPILE_OK
#include "runtime/protocol.hpp"
#endif

int main() {}
