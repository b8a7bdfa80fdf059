#include "e2e/simulated/functions.hpp"

#include <dirent.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/proc_file.hpp"

namespace simtest {

int add(int a, int b) { return a + b; }

int node_after(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}

std::vector<std::string> accelerators() { return sky::instance_info().accelerators; }

sky::Callback Recorder::callback() {
    return [this](const sky::Event& e) -> std::optional<sky::Event> {
        std::lock_guard lk(m);
        events.push_back(e);
        return std::nullopt;
    };
}

std::vector<std::string> Recorder::names() {
    static constexpr std::array<const char*, std::variant_size_v<sky::Event>> n = {
        "InfraCreating",     "InfraCreated",      "InstanceLaunching",  "InstanceProvisioned",
        "BootstrapStarting", "BootstrapProgress", "BootstrapCompleted", "PoolStarted",
        "LogLine",           "Metrics",           "InstancePreempted",  "InstanceReplaced",
        "PoolStopping",      "InstanceStopping",  "CostUpdate",         "CostFinal",
        "ErrorEvent",        "PreemptionNotice",  "PoolScaled",         "NodeDraining",
        "BudgetWarning"};
    std::lock_guard lk(m);
    std::vector<std::string> out;
    for (auto& e : events) out.emplace_back(n[e.index()]);
    return out;
}

sky::PoolSpec simulated(sky::Simulated cloud, int nodes, Recorder& rec, sky::Spot spot) {
    return {.provider = std::move(cloud),
            .nodes = nodes,
            .spot = std::move(spot),
            .display = std::getenv("SIMTEST_LOG") ? sky::Display::log : sky::Display::quiet,
            .on_event = rec.callback(),
            .collect_metrics = false};
}

int children() { return sky::test::count_children(/*zombies=*/true); }

bool eventually(const std::function<bool()>& ok, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (int i = 0; i < 100000; ++i) {
        if (ok()) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ok();
}

ScopedEnv::ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
}
ScopedEnv::~ScopedEnv() { ::unsetenv(name.c_str()); }

int orphan_client(const char* file) {
    Recorder rec;
    sky::ComputePool pool{simulated({}, 2, rec)};
    {
        std::ofstream out(std::string(file) + ".tmp");
        out << pool.id() << "\n";
        for (const auto& i : pool.instances()) out << i.id << "\n";
    }
    std::rename((std::string(file) + ".tmp").c_str(), file);
    std::this_thread::sleep_for(std::chrono::seconds(60));  // killed long before
    return 0;
}

}  // namespace simtest
