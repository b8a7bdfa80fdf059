// A program written from api.md §5b that owns a Slurm pool and is interrupted by the tests:
//   sky_slurm_driver LOGIN KEY KNOWN_HOSTS PARTITION NODES [IDLE_SECONDS]
// LOGIN "-" means this machine is the login node (sbatch and friends run here). It prints
// "ready <pool id>" once the pool runs, then blocks in a long remote call on every node until
// a signal ends it. When Slurm ends the pool's job, it prints "lost <what>" and calls again
// (on the nodes of the job that replaces it), three times at most.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sky/sky.hpp>
#include <string>
#include <thread>

int nap(int seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return seconds;
}

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: in a worker this serves calls and exits
    if (argc != 6 && argc != 7) {
        std::fprintf(stderr, "usage: %s LOGIN|- KEY KNOWN_HOSTS PARTITION NODES [IDLE_SECONDS]\n",
                     argv[0]);
        return 2;
    }
    const std::string login = argv[1];
    sky::ComputePool pool{{
        .provider = sky::Slurm{.login = login == "-" ? std::string() : login,
                               .partition = argv[4],
                               .queue_timeout = std::chrono::minutes{2},
                               .identity_file = argv[2],
                               .known_hosts = argv[3]},
        .nodes = std::atoi(argv[5]),
        .idle_timeout = std::chrono::seconds(argc == 7 ? std::atoi(argv[6]) : 600),
        .display = sky::Display::quiet,
        .collect_metrics = false,
    }};
    std::printf("ready %s\n", pool.id().c_str());
    std::fflush(stdout);
    for (int lost = 0; lost < 3; ++lost) {
        try {
            const auto r = sky::compute<nap>(600) | pool;
            std::printf("finished %zu\n", r.size());
            return 0;
        } catch (const sky::NodeLostError& e) {
            std::printf("lost %s\n", e.what());
            std::fflush(stdout);
        }
    }
    return 1;
}
