// What a pool costs (seed 002's `CostUpdate` / `CostFinal` events): every instance accrues from
// its start to its stop at its own hourly rate, spot or on-demand; `pool.cost()` says how much so
// far, `CostUpdate` comes every 10 s while something costs money, `CostFinal` after teardown with
// the savings against on-demand prices.
//
// sky::Local and sky::SSH cost nothing, so this example runs on sky::Simulated by default: a cloud
// in a box with the catalog's AWS offers and on-demand prices and a seeded spot market of its own
// (docs/testing.md), nodes as worker processes on this machine, no credentials. --provider picks
// a real one.
//
//   example_cost                                        # sky::Simulated
//   example_cost --provider aws                         # real prices, real money
#include <example_provider.hpp>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <optional>
#include <sky/sky.hpp>

namespace job {

double work(int n) {
    double s = 0;
    for (int i = 1; i <= n; ++i) s += 1.0 / i;
    return s;
}

}  // namespace job

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::Provider provider = examples::flag(argc, argv, "provider").empty()
                                     ? sky::Provider{sky::Simulated{.seed = 7}}
                                     : examples::provider_from_args(argc, argv);

        std::mutex mutex;
        std::optional<sky::CostFinal> final_cost;
        double rate = 0;
        {
            sky::ComputePool pool{
                {.provider = provider,
                 .nodes = examples::nodes_from_args(argc, argv, 2),
                 .accelerator = "T4",
                 .spot = "always",
                 .on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
                     if (auto* c = std::get_if<sky::CostFinal>(&e)) {
                         std::lock_guard lock(mutex);
                         final_cost = *c;
                     }
                     return std::nullopt;
                 }}};

            std::cout << std::fixed << std::setprecision(4);
            for (const sky::Instance& i : pool.instances()) {
                std::cout << "node " << i.node << ": " << i.instance_type << ", "
                          << (i.spot ? "spot" : "on-demand") << " at $" << i.hourly_price
                          << "/h (on-demand $" << i.on_demand_price << "/h)\n";
                rate += i.hourly_price;
            }
            std::cout << "pool rate: $" << rate << "/h\n";

            sky::compute<job::work>(1'000'000) | pool;
            std::cout << "pool.cost() after the work: $" << std::setprecision(6) << pool.cost()
                      << " (> 0: " << (pool.cost() > 0 ? "yes" : "no") << ")\n";
        }  // teardown; CostFinal arrives

        std::lock_guard lock(mutex);
        if (!final_cost) {
            std::cout << "no CostFinal event\n";
            return 1;
        }
        std::cout << std::setprecision(6) << "CostFinal: total $" << final_cost->total_cost
                  << " for " << std::setprecision(1) << final_cost->total_seconds << " s at $"
                  << std::setprecision(4) << final_cost->hourly_rate << "/h, "
                  << final_cost->spot_count << " spot, " << final_cost->ondemand_count
                  << " on-demand, saved $" << std::setprecision(6)
                  << final_cost->savings_vs_ondemand << " against on-demand\n";
        // Each instance's time is rounded up to its provider's billing increment (and minimum),
        // so the bill is at least the pool's rate for the pool's time; CostFinal's hourly_rate
        // is what the pool cost per hour of its life.
        std::cout << "billed at least the pool rate for the time: "
                  << (final_cost->total_cost >= rate * final_cost->total_seconds / 3600 * 0.999
                          ? "yes"
                          : "no")
                  << "\n";
        std::cout << "spot saved money: " << (final_cost->savings_vs_ondemand > 0 ? "yes" : "no")
                  << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
