// sky_fake_ec2: serves the fake EC2 on 127.0.0.1 until SIGINT/SIGTERM or --max-seconds pass.
// The secret key comes from the environment (SKY_FAKE_EC2_SECRET), never from the command line,
// where other users could read it.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "fakes/ec2/fake_ec2.hpp"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
    sky::test::FakeEc2Options options;
    int max_seconds = 3600;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        std::string value = argv[i + 1];
        if (flag == "--port") {
            options.port = static_cast<unsigned short>(std::stoi(value));
        } else if (flag == "--region") {
            options.region = value;
        } else if (flag == "--access-key") {
            options.access_key_id = value;
        } else if (flag == "--model") {
            options.model_path = value;
        } else if (flag == "--instance-types") {
            options.instance_types_path = value;
        } else if (flag == "--max-seconds") {
            max_seconds = std::stoi(value);
        } else {
            std::cerr
                << "usage: sky_fake_ec2 --model service-2.json [--port N] [--region R] "
                   "[--access-key K] [--instance-types FILE.json] [--max-seconds S]  (secret in "
                   "SKY_FAKE_EC2_SECRET)\n";
            return 2;
        }
    }
    const char* secret = std::getenv("SKY_FAKE_EC2_SECRET");
    if (!secret || options.model_path.empty()) {
        std::cerr << "sky_fake_ec2: --model and SKY_FAKE_EC2_SECRET are required\n";
        return 2;
    }
    options.secret_access_key = secret;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    try {
        sky::test::FakeEc2 server(options);
        std::cout << "sky_fake_ec2 listening on " << server.endpoint() << std::endl;
        for (int waited = 0; !g_stop && waited < max_seconds * 10; ++waited) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    } catch (const std::exception& e) {
        std::cerr << "sky_fake_ec2: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
