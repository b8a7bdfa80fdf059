// Events and callbacks (seeds 002, 003): a pool reports what it does as typed events. Three ways to
// listen, as in the seeds:
//   - `.on_event = callback` in the pool's spec (here two callbacks joined with sky::compose),
//   - `pool.on<sky::LogLine>(handler)` for one event type,
//   - `auto guard = sky::use_callback(callback)`: every pool's events, and sky::emit's, while the
//     guard lives.
// A callback may return an event, which is dispatched in turn: here remote lines that start with
// "WARNING" come back as ErrorEvents.
//
//   example_events                                      # 2 worker processes on this machine
//   example_events --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <atomic>
#include <example_provider.hpp>
#include <iostream>
#include <mutex>
#include <optional>
#include <sky/sky.hpp>
#include <string>
#include <variant>

namespace job {

int train(int steps) {
    for (int i = 1; i <= steps; ++i) std::cout << "step " << i << " of " << steps << std::endl;
    return steps;
}

void check_disk() { std::cerr << "WARNING: scratch disk is 91% full" << std::endl; }

}  // namespace job

// Callbacks run on the pool's threads; one lock keeps their lines whole.
std::mutex print_mutex;

// The seeds' `my_callback` with `match event: case Metrics(...) / case LogLine(...)`.
std::optional<sky::Event> my_callback(const sky::Event& event) {
    std::lock_guard lock(print_mutex);
    if (auto* m = std::get_if<sky::Metrics>(&event)) {
        std::cout << "CPU: " << m->cpu_percent << "% on node " << m->node << "\n";
    } else if (auto* line = std::get_if<sky::LogLine>(&event)) {
        std::cout << (line->node < 0 ? "[client] " : "[remote] ") << line->line << "\n";
    } else if (auto* error = std::get_if<sky::ErrorEvent>(&event)) {
        std::cout << "[error] " << error->message << "\n";
    }
    return std::nullopt;
}

// Returns a new event for the pool to dispatch: a remote warning becomes an ErrorEvent.
std::optional<sky::Event> warnings_to_errors(const sky::Event& event) {
    if (auto* line = std::get_if<sky::LogLine>(&event); line && line->line.starts_with("WARNING"))
        return sky::ErrorEvent{line->line, std::optional<std::string>(line->instance_id)};
    return std::nullopt;
}

// Counts a few event types; it lives outside the pool, so it also sees the teardown's events.
struct Tally {
    std::atomic<int> provisioned{0}, bootstrapped{0}, started{0}, errors{0}, stopping{0},
        instance_stopping{0}, cost_final{0}, emitted{0};

    std::optional<sky::Event> operator()(const sky::Event& e) {
        if (std::holds_alternative<sky::InstanceProvisioned>(e)) ++provisioned;
        if (std::holds_alternative<sky::BootstrapCompleted>(e)) ++bootstrapped;
        if (std::holds_alternative<sky::PoolStarted>(e)) ++started;
        if (std::holds_alternative<sky::ErrorEvent>(e)) ++errors;
        if (std::holds_alternative<sky::PoolStopping>(e)) ++stopping;
        if (std::holds_alternative<sky::InstanceStopping>(e)) ++instance_stopping;
        if (std::holds_alternative<sky::CostFinal>(e)) ++cost_final;
        if (auto* l = std::get_if<sky::LogLine>(&e);
            l && l->line.starts_with("hello from sky::emit"))
            ++emitted;
        return std::nullopt;
    }
};

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        Tally tally;
        auto guard = sky::use_callback([&tally](const sky::Event& e) { return tally(e); });

        // An event of the program's own, to whoever listens through use_callback.
        sky::emit(sky::LogLine{.node = -1, .line = "hello from sky::emit"});

        std::atomic<int> remote_lines{0}, emitted_lines{0};
        {
            sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                                   .nodes = examples::nodes_from_args(argc, argv, 2),
                                   .display = sky::Display::quiet,  // the callbacks print instead
                                   .on_event = sky::compose(my_callback, warnings_to_errors)}};
            pool.on<sky::LogLine>(
                [&](const sky::LogLine& l) { ++(l.node < 0 ? emitted_lines : remote_lines); });
            sky::emit(sky::LogLine{.node = -1, .line = "hello from sky::emit while the pool runs"});

            int steps = sky::compute<job::train>(3) >> pool;
            sky::compute<job::check_disk>() >> pool;
            std::lock_guard lock(print_mutex);
            std::cout << "train returned " << steps << "\n";
        }  // teardown: PoolStopping, InstanceStopping per node, CostFinal

        std::cout << "pool.on<LogLine> saw " << remote_lines << " remote lines and "
                  << emitted_lines << " emitted by the client\n";
        std::cout << "use_callback saw: " << tally.provisioned << " InstanceProvisioned, "
                  << tally.started << " PoolStarted, " << tally.errors << " ErrorEvent, "
                  << tally.stopping << " PoolStopping, " << tally.instance_stopping
                  << " InstanceStopping, " << tally.cost_final << " CostFinal\n";
        std::cout << "bootstrap: " << tally.bootstrapped << " BootstrapCompleted\n";
        std::cout << "sky::emit reached use_callback: " << tally.emitted << " of 2\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
