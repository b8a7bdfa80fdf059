// Asking for accelerators, and finding out what you got (seeds 002 and 004: the typed factories
// `H100(count=4)`, `H100(mig="3g.40gb")`, `A100(memory="40GB")`, `Trainium(version=2)`,
// `TPUSlice("v5p-8")`, `MI("300X")`; strings such as "A100" and "H100:8"; `is_nvidia`,
// `is_trainium`, `select_instance(instances, accelerator="H100", cpu=32, memory="128GB")`;
// `instance_info()` and `current_accelerator()` inside a compute function).
//
// The factories carry catalog facts (H100() already knows its 80 GB). The pool part runs on
// sky::Simulated by default, because this machine has no GPU: the simulated cloud picks the
// catalog's instance for the request and tells the function what that machine would have
// (docs/testing.md). --provider picks a real cloud.
//
//   example_accelerators                                # sky::Simulated
//   example_accelerators --provider aws                 # a real T4 instance
#include <example_provider.hpp>
#include <iostream>
#include <optional>
#include <sky/sky.hpp>
#include <string>

namespace job {

// What the node has, as a compute function sees it: a GPU path when there is one, else the CPU's.
std::string detect() {
    sky::InstanceInfo info = sky::instance_info();
    std::optional<sky::Accelerator> acc = sky::current_accelerator();
    if (acc && sky::is_nvidia(acc->name))
        return "NVIDIA " + acc->to_string() + " (" + acc->memory.value_or("?") + "), " +
               std::to_string(info.accelerators.size()) + " in instance_info: take the GPU path";
    return "no GPU: take the CPU path";
}

}  // namespace job

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        namespace acc = sky::accelerators;
        sky::Accelerator h100 = acc::H100();
        std::cout << "H100(): " << h100.name << ", " << h100.memory.value_or("?") << ", "
                  << h100.architecture << "\n";
        std::cout << "H100({.count = 4}): " << acc::H100({.count = 4}).to_string() << "\n";
        sky::Accelerator mig = acc::H100({.mig = "3g.40gb"});
        std::cout << "H100({.mig = \"3g.40gb\"}): " << sky::workers_per_device(mig)
                  << " workers per GPU\n";
        std::cout << "A100({.memory = \"40GB\"}): " << acc::A100({.memory = "40GB"}).to_string()
                  << "\n";
        std::cout << "Trainium({.version = 2}): " << acc::Trainium({.version = 2}).name
                  << ", TPUSlice(\"v5p-8\"): " << acc::TPUSlice("v5p-8").name
                  << ", MI(\"300X\"): " << acc::MI("300X").name << "\n";
        std::cout << "\"H100:8\" parses as " << sky::Accelerator::parse("H100:8").count << " x "
                  << sky::Accelerator::parse("H100:8").name << "\n";
        std::cout << std::boolalpha << "is_nvidia(\"H100\") = " << sky::is_nvidia("H100")
                  << ", is_nvidia(\"MI300X\") = " << sky::is_nvidia("MI300X")
                  << ", is_trainium(\"Trainium2\") = " << sky::is_trainium("Trainium2") << "\n";
        std::cout << sky::known_accelerators().size() << " accelerator names known\n";

        // The cheapest AWS offer with an H100, at least 32 vCPUs and 128 GB of memory.
        std::optional<sky::Offer> best =
            sky::select_instance(sky::Catalog::embedded().offers("aws"),
                                 {.accelerator = "H100", .cpu = 32, .memory = "128GB"});
        if (best)
            std::cout << "select_instance(H100, 32 vCPU, 128GB) = " << best->instance_type << " ("
                      << best->accelerator_count << " x " << best->accelerator << ", $"
                      << best->on_demand_price << "/h)\n";

        // A pool with a T4: the function finds it at run time.
        sky::Provider provider = examples::flag(argc, argv, "provider").empty()
                                     ? sky::Provider{sky::Simulated{.seed = 5}}
                                     : examples::provider_from_args(argc, argv);
        sky::ComputePool pool{{.provider = provider, .accelerator = acc::T4()}};
        std::cout << "instance: " << pool.instances().at(0).instance_type << "\n";
        std::cout << "on the node: " << (sky::compute<job::detect>() >> pool) << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
