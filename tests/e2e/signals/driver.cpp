// A program written from api.md that owns a pool and is interrupted by the signals tests:
//   sky_signal_driver local|simulated|ssh|aws|runpod|vastai|verda|digitalocean [--nodes N]
//       [--endpoint URL] [--hosts A,B] [--port P] [--identity FILE] [--known-hosts FILE]
//       [--slow-teardown] [--ignore-hup] [--own-term-handler] [--catch]
// It prints "ready <pool id>" and one "instance <id>" line per node once the pool runs, then
// blocks in a long remote call until a signal ends it. Its event handler holds references to
// locals of the function that owns the pool. With --catch, the call's error is caught: the pool
// leaves scope, those locals are destroyed, and the program would return 1; an event that
// reaches the handler after the pool's destructor returned ends it with status 3.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

int nap(int seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return seconds;
}

extern "C" void own_term_handler(int) {
    const char msg[] = "own handler\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(42);
}

namespace {

std::atomic<bool> g_pool_gone{false};  // set once the pool's destructor has returned

struct Options {
    std::string provider;
    int nodes = 1;
    std::string endpoint, port, identity, known_hosts;
    std::vector<std::string> hosts;
    bool slow_teardown = false;
    bool catch_error = false;
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t from = 0;
    for (std::size_t comma; (comma = s.find(',', from)) != std::string::npos; from = comma + 1)
        out.push_back(s.substr(from, comma - from));
    out.push_back(s.substr(from));
    return out;
}

sky::PoolSpec spec_of(const Options& o) {
    sky::PoolSpec spec;
    if (o.provider == "aws") {
        spec.provider = sky::AWS{.region = "us-east-1", .endpoint = o.endpoint};
        spec.accelerator = "A100";
    } else if (o.provider == "simulated") {
        spec.provider = sky::Simulated{};
        spec.accelerator = "A100";
    } else if (o.provider == "ssh") {
        sky::SSH ssh;
        ssh.hosts = o.hosts;
        if (!o.port.empty()) ssh.port = std::atoi(o.port.c_str());
        ssh.identity_file = o.identity;
        ssh.known_hosts = o.known_hosts;
        spec.provider = ssh;
    } else if (o.provider == "runpod") {
        spec.provider = sky::RunPod{.endpoint = o.endpoint};
        spec.accelerator = "RTX4090";
        spec.spot = sky::Spot::Never{};
    } else if (o.provider == "vastai") {
        spec.provider = sky::VastAI{.endpoint = o.endpoint};
        spec.accelerator = "RTX4090";
        spec.spot = sky::Spot::Never{};
    } else if (o.provider == "verda") {
        spec.provider = sky::Verda{.endpoint = o.endpoint};
        spec.accelerator = "H100";
        spec.spot = sky::Spot::Never{};
    } else if (o.provider == "digitalocean") {
        spec.provider = sky::DigitalOcean{.endpoint = o.endpoint};
        spec.accelerator = "H100";
        spec.spot = sky::Spot::Never{};
    } else {
        spec.provider = sky::Local{};
    }
    spec.nodes = o.nodes;
    spec.display = sky::Display::quiet;
    spec.collect_metrics = false;
    return spec;
}

// Owns the pool; its handler writes into `seen`, a local that dies when this returns.
int run_pool(const Options& o) {
    std::mutex seen_m;
    std::vector<std::string> seen;
    sky::PoolSpec spec = spec_of(o);
    spec.on_event = [&seen, &seen_m, &o](const sky::Event& e) -> std::optional<sky::Event> {
        if (g_pool_gone.load()) {
            const char msg[] = "event after the pool's destructor returned\n";
            (void)!::write(2, msg, sizeof msg - 1);
            ::_exit(3);
        }
        {
            std::lock_guard lk(seen_m);
            seen.push_back(sky::describe(e));
        }
        if (o.slow_teardown && std::holds_alternative<sky::PoolStopping>(e)) {
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

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: in a worker this serves calls and exits
    if (argc < 2) {
        std::fprintf(stderr,
                     "usage: %s local|simulated|ssh|aws|runpod|vastai|verda|digitalocean "
                     "[options]\n",
                     argv[0]);
        return 2;
    }
    Options o;
    o.provider = argv[1];
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        const bool more = i + 1 < argc;
        if (a == "--nodes" && more) {
            o.nodes = std::atoi(argv[++i]);
        } else if (a == "--endpoint" && more) {
            o.endpoint = argv[++i];
        } else if (a == "--hosts" && more) {
            o.hosts = split(argv[++i]);
        } else if (a == "--port" && more) {
            o.port = argv[++i];
        } else if (a == "--identity" && more) {
            o.identity = argv[++i];
        } else if (a == "--known-hosts" && more) {
            o.known_hosts = argv[++i];
        } else if (a == "--slow-teardown") {
            o.slow_teardown = true;
        } else if (a == "--catch") {
            o.catch_error = true;
        } else if (a == "--ignore-hup") {
            std::signal(SIGHUP, SIG_IGN);  // as nohup does
        } else if (a == "--own-term-handler") {
            std::signal(SIGTERM, own_term_handler);
        } else {
            std::fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!o.catch_error) return run_pool(o);  // the call's error ends the program (terminate)
    try {
        run_pool(o);
    } catch (const std::exception& e) {
        g_pool_gone = true;
        std::fprintf(stderr, "error: %s\n", e.what());
        // Late events would arrive now; a signal's teardown still running ends the program by
        // the signal before this returns or while exit() runs.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return 1;
    }
    return 0;
}
