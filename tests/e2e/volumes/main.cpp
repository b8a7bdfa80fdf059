// The volume tests' main: the binary is shipped to the test hosts and runs there as the worker,
// so sky::init comes first.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "sky/sky.hpp"

namespace volumes_test {

std::string read_file(std::string path);

// A client that is SIGKILLed while its pool (one host, one volume) is up: the watchdog test.
// Reads identity file, known_hosts, port, endpoint and host from `spec_file`.
std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

int orphan_client(const char* spec_file) {
    std::ifstream f(spec_file);
    sky::SSH ssh;
    std::string endpoint, host;
    f >> ssh.identity_file >> ssh.known_hosts >> ssh.port >> endpoint >> host;
    ssh.hosts = {host};
    sky::ComputePool pool{
        {.provider = ssh,
         .volumes = {sky::S3Volume{.mount_path = "/root/data",
                                   .bucket = "sky-datasets",
                                   .endpoint = endpoint,
                                   .access_key_id = env("S3_ACCESS_KEY_ID"),
                                   .secret_access_key = env("S3_SECRET_ACCESS_KEY")}},
         .idle_timeout = std::chrono::seconds(3),
         .display = sky::Display::quiet}};
    (void)(sky::compute<read_file>(std::string("/root/data/none")) >> pool);
    std::ofstream(std::string(spec_file) + ".ready") << "ready\n";
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
}

}  // namespace volumes_test

int main(int argc, char** argv) {
    sky::init(argc, argv);
    if (argc == 3 && std::strcmp(argv[1], "--orphan-volume-client") == 0)
        return volumes_test::orphan_client(argv[2]);
    return Catch::Session().run(argc, argv);
}
