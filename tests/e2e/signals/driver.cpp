// A program written from api.md that owns a pool and is interrupted by the signals tests:
//   sky_signal_driver local|simulated|ssh|aws|runpod|vastai|verda|digitalocean [--nodes N]
//       [--endpoint URL] [--hosts A,B] [--port P] [--identity FILE] [--known-hosts FILE]
//       [--slow-teardown] [--ignore-hup] [--own-term-handler] [--catch]
//       [--elastic] [--slow-wake MS] [--drain]
// It prints "ready <pool id>" and one "instance <id>" line per node once the pool runs, then
// blocks in a long remote call until a signal ends it. With --elastic the pool is elastic
// (min 0, max 2; --nodes 0 is a lazy start) and the driver prints "waking" once its call is
// submitted; --slow-wake slows a Simulated node 0's bootstrap by MS; with --drain, once the call
// runs, pool.resize(0) drains every node and the driver prints "draining". Its event handler holds
// references to locals of the function that owns the pool. With --catch, the call's error is
// caught: the pool leaves scope, those locals are destroyed, and the program would return 1; an
// event that reaches the handler after the pool's destructor returned ends it with status 3.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

int nap(int seconds) {
    std::printf("napping\n");
    std::fflush(stdout);
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
    bool elastic = false;
    int slow_wake_ms = 0;
    bool drain = false;
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
        sky::Simulated sim;
        if (o.slow_wake_ms > 0)
            sim.faults.push_back(
                sky::Fault::slow_bootstrap(0, std::chrono::milliseconds(o.slow_wake_ms)));
        spec.provider = sim;
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
    if (o.elastic)
        spec.autoscale = {.min = 0, .max = 2, .scaledown_window = std::chrono::seconds(600)};
    return spec;
}

// Owns the pool; its handler writes into `seen`, a local that dies when this returns.
int run_pool(const Options& o) {
    std::mutex seen_m;
    std::vector<std::string> seen;
    std::atomic<bool> napping{false};  // the call printed that it runs
    sky::PoolSpec spec = spec_of(o);
    spec.on_event = [&seen, &seen_m, &o,
                     &napping](const sky::Event& e) -> std::optional<sky::Event> {
        if (g_pool_gone.load()) {
            const char msg[] = "event after the pool's destructor returned\n";
            (void)!::write(2, msg, sizeof msg - 1);
            ::_exit(3);
        }
        {
            std::lock_guard lk(seen_m);
            seen.push_back(sky::describe(e));
        }
        if (auto* l = std::get_if<sky::LogLine>(&e); l && l->line.find("napping") == 0)
            napping = true;
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
    if (o.elastic) {
        auto call = pool.submit(sky::compute<nap>(600));
        std::optional<sky::Future<void>> drained;
        std::printf("waking\n");
        std::fflush(stdout);
        if (o.drain) {
            // Drained while its call runs: the node takes no new call and waits for this one.
            for (int i = 0; i < 3000 && !napping; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            drained.emplace(pool.resize(0));
            std::printf("draining\n");
            std::fflush(stdout);
        }
        const int r = call.get();
        std::printf("finished %d\n", r);
        return 0;
    }
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
        } else if (a == "--elastic") {
            o.elastic = true;
        } else if (a == "--slow-wake" && more) {
            o.slow_wake_ms = std::atoi(argv[++i]);
        } else if (a == "--drain") {
            o.drain = true;
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
