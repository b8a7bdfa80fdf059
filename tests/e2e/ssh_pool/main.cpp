#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstring>

#include "sky/sky.hpp"

namespace ssh_pool {
int orphan_client(const char* spec_file);
}

int main(int argc, char** argv) {
    sky::init(argc, argv);
    if (argc == 3 && std::strcmp(argv[1], "--orphan-ssh-client") == 0)
        return ssh_pool::orphan_client(argv[2]);
    return Catch::Session().run(argc, argv);
}
