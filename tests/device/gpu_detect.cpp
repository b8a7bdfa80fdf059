// The worker's GPU detection on the machine it runs on: what `detect_worker_plan` and the metrics
// sampler make of this machine's nvidia-smi. Built and run by tests/device/gpu_detect.sh on a GPU
// machine (which need not have sky's dependencies); on a CPU machine it reports no GPU.
#include <cstdio>
#include <sky/accelerator.hpp>

#include "metrics/metrics.hpp"

using namespace sky::detail;

int main() {
    const auto detected = detect_nvidia_accelerator();
    std::printf("detected accelerator: %s\n", detected ? detected->to_string().c_str() : "(none)");
    if (const auto smi = find_on_path("nvidia-smi")) {
        const auto list = run_with_timeout(*smi, kNvidiaSmiListArgs, std::chrono::seconds(5));
        for (const auto& gpu : parse_nvidia_smi_list(list.value_or("")))
            std::printf("gpu %d: %s %s, %zu MIG slices\n", gpu.index, gpu.name.c_str(),
                        gpu.uuid.c_str(), gpu.slices.size());
    }
    auto print_plan = [](const char* what, const WorkerPlan& plan) {
        std::printf("plan for %s: %d worker(s), accelerator %s, CUDA_VISIBLE_DEVICES", what,
                    plan.workers, plan.accelerator ? plan.accelerator->to_string().c_str() : "-");
        for (const auto& d : plan.devices) std::printf(" [%s]", d.c_str());
        std::printf("\n");
    };
    print_plan("no request", detect_worker_plan(std::nullopt));
    print_plan("H100", detect_worker_plan(sky::Accelerator::parse("H100")));
    MetricsSampler sampler;
    const auto s = sampler.sample();
    std::printf("metrics: cpu %.1f%%, memory %.0f/%.0f MiB", s.cpu_percent, s.memory_used_mb,
                s.memory_total_mb);
    if (s.gpu_memory_total_mb)
        std::printf(", gpu util %.0f%%, gpu memory %.0f/%.0f MiB, %.0f C",
                    s.gpu_utilization.value_or(-1), s.gpu_memory_used_mb.value_or(-1),
                    *s.gpu_memory_total_mb, s.gpu_temperature.value_or(-1));
    std::printf("\n");
    return detected ? 0 : 1;
}
