// A program written from api.md that owns a pool and is interrupted by the signals tests:
//   sky_signal_driver local|aws|simulated [--nodes N] [--endpoint URL] [--slow-teardown]
//                                         [--ignore-hup] [--own-term-handler]
// It prints "ready <pool id>" and one "instance <id>" line per node once the pool runs, then
// blocks in a long remote call until a signal ends it.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sky/sky.hpp>
#include <string>
#include <thread>

int nap(int seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return seconds;
}

extern "C" void own_term_handler(int) {
    const char msg[] = "own handler\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(42);
}

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: in a worker this serves calls and exits
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s local|aws|simulated [options]\n", argv[0]);
        return 2;
    }
    const std::string provider = argv[1];
    int nodes = 1;
    std::string endpoint;
    bool slow_teardown = false;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--nodes" && i + 1 < argc) {
            nodes = std::atoi(argv[++i]);
        } else if (a == "--endpoint" && i + 1 < argc) {
            endpoint = argv[++i];
        } else if (a == "--slow-teardown") {
            slow_teardown = true;
        } else if (a == "--ignore-hup") {
            std::signal(SIGHUP, SIG_IGN);  // as nohup does
        } else if (a == "--own-term-handler") {
            std::signal(SIGTERM, own_term_handler);
        } else {
            std::fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    sky::PoolSpec spec;
    if (provider == "aws") {
        spec.provider = sky::AWS{.region = "us-east-1", .endpoint = endpoint};
        spec.accelerator = "A100";
    } else if (provider == "simulated") {
        spec.provider = sky::Simulated{};
        spec.accelerator = "A100";
    } else {
        spec.provider = sky::Local{};
    }
    spec.nodes = nodes;
    spec.display = sky::Display::quiet;
    spec.collect_metrics = false;
    spec.on_event = [slow_teardown](const sky::Event& e) -> std::optional<sky::Event> {
        if (slow_teardown && std::holds_alternative<sky::PoolStopping>(e)) {
            std::printf("stopping\n");
            std::fflush(stdout);
            std::this_thread::sleep_for(std::chrono::seconds(30));
        }
        return std::nullopt;
    };
    sky::ComputePool pool{spec};
    std::printf("ready %s\n", pool.id().c_str());
    for (const auto& i : pool.instances()) std::printf("instance %s\n", i.id.c_str());
    std::fflush(stdout);
    const int r = sky::compute<nap>(600) >> pool;
    std::printf("finished %d\n", r);
    return 0;
}
