// The test program is its own worker: sky::init first, then Catch. Each run keeps its ledger and
// simulated-machine records in a scratch SKY_HOME, removed at the end.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "sky/sky.hpp"

int main(int argc, char** argv) {
    sky::init(argc, argv);
    std::string tmpl = (std::filesystem::temp_directory_path() / "sky-elastic-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return 2;
    ::setenv("SKY_HOME", tmpl.c_str(), 1);
    const int rc = Catch::Session().run(argc, argv);
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
    return rc;
}
