#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "metrics/metrics.hpp"

using namespace sky::detail;

TEST_CASE("metrics: /proc/stat CPU percent", "[metrics]") {
    const char* a =
        "cpu  100 0 100 700 100 0 0 0 0 0\n"
        "cpu0 50 0 50 350 50 0 0 0 0 0\n"
        "intr 12345\n";
    const char* b = "cpu  200 0 200 1200 100 0 0 0 0 0\ncpu0 1 1 1 1\n";
    auto ta = parse_proc_stat(a), tb = parse_proc_stat(b);
    REQUIRE(ta);
    REQUIRE(tb);
    CHECK(ta->busy == 200);
    CHECK(ta->total == 1000);
    // 200 busy of 700 total.
    CHECK(cpu_percent(*ta, *tb) == Approx(100.0 * 200 / 700));
    CHECK(cpu_percent(*tb, *ta) == 0.0);
    CHECK(cpu_percent(*ta, *ta) == 0.0);
    CHECK_FALSE(parse_proc_stat("intr 1 2 3\n"));
    CHECK_FALSE(parse_proc_stat("cpu  x y z\n"));
}

TEST_CASE("metrics: /proc/meminfo", "[metrics]") {
    auto m = parse_meminfo(
        "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n"
        "MemAvailable:    4096000 kB\nBuffers:          100 kB\n");
    REQUIRE(m);
    CHECK(m->total_mb == Approx(16000));
    CHECK(m->used_mb == Approx(12000));
    CHECK(m->percent == Approx(75));
    // Old kernels: no MemAvailable.
    auto old = parse_meminfo(
        "MemTotal: 1024000 kB\nMemFree: 256000 kB\nBuffers: 0 kB\n"
        "Cached: 256000 kB\n");
    REQUIRE(old);
    CHECK(old->used_mb == Approx(500));
    CHECK_FALSE(parse_meminfo("SwapTotal: 0 kB\n"));
}

TEST_CASE("metrics: nvidia-smi aggregation", "[metrics]") {
    auto g = parse_nvidia_smi("90, 30000, 81559, 60\n10, 1000, 81559, 45\n");
    CHECK(g.gpus == 2);
    CHECK(*g.utilization == Approx(50));
    CHECK(*g.memory_used_mb == Approx(31000));
    CHECK(*g.memory_total_mb == Approx(163118));
    CHECK(*g.temperature == Approx(60));
    auto na = parse_nvidia_smi("[N/A], 500, 15360, [Not Supported]\n");
    CHECK(na.gpus == 1);
    CHECK_FALSE(na.utilization);
    CHECK_FALSE(na.temperature);
    CHECK(*na.memory_used_mb == Approx(500));
    auto none = parse_nvidia_smi("");
    CHECK(none.gpus == 0);
    CHECK_FALSE(none.utilization);
    CHECK(parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate\n").gpus == 0);
}

TEST_CASE("metrics: the sampler reads real sources and never hangs", "[metrics]") {
    MetricsSampler sampler({.nvidia_smi = std::string("/nonexistent/nvidia-smi")});
    auto s = sampler.sample();
    if (std::filesystem::exists("/proc/meminfo")) {
        CHECK(s.memory_total_mb > 0);
        CHECK(s.memory_percent >= 0);
        CHECK(s.memory_percent <= 100);
    }
    CHECK(s.cpu_percent >= 0);
    CHECK(s.cpu_percent <= 100);
    CHECK_FALSE(s.gpu_utilization);  // nvidia-smi absent

    // A fake nvidia-smi prints two GPUs; a hanging one is killed at the timeout.
    const auto dir =
        std::filesystem::temp_directory_path() / ("sky_metrics_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto good = dir / "smi-good", hang = dir / "smi-hang";
    std::ofstream(good) << "#!/bin/sh\necho '20, 100, 1000, 50'\necho '40, 300, 1000, 70'\n";
    std::ofstream(hang) << "#!/bin/sh\nexec sleep 30\n";
    std::filesystem::permissions(good, std::filesystem::perms::owner_all);
    std::filesystem::permissions(hang, std::filesystem::perms::owner_all);

    MetricsSampler with_gpu({.nvidia_smi = good.string()});
    s = with_gpu.sample();
    REQUIRE(s.gpu_utilization);
    CHECK(*s.gpu_utilization == Approx(30));
    CHECK(*s.gpu_memory_used_mb == Approx(400));
    CHECK(*s.gpu_memory_total_mb == Approx(2000));
    CHECK(*s.gpu_temperature == Approx(70));

    const auto t0 = std::chrono::steady_clock::now();
    MetricsSampler hanging(
        {.nvidia_smi = hang.string(), .gpu_timeout = std::chrono::milliseconds(300)});
    s = hanging.sample();
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK_FALSE(s.gpu_utilization);
    CHECK(took < std::chrono::seconds(5));
    std::filesystem::remove_all(dir);
}

TEST_CASE("metrics: real nvidia-smi output from an H100 node", "[metrics]") {
    // Captured on an H100 80GB HBM3 node with the two queries the sampler runs.
    auto g = parse_nvidia_smi("0, 0, 81559, 43\n");
    CHECK(g.gpus == 1);
    CHECK(*g.memory_total_mb == Approx(81559));
    CHECK(*g.temperature == Approx(43));
    auto a = parse_nvidia_smi_devices("NVIDIA H100 80GB HBM3, 81559\n");
    REQUIRE(a);
    CHECK(a->name == "H100");
    CHECK(a->memory == "80GB");
    CHECK(a->count == 1);
    // `nvidia-smi -L` on an H100 node (driver 580.159.04, MIG disabled), and the plan the worker
    // made there (tests/device/gpu_detect.sh printed the same).
    const auto list = parse_nvidia_smi_list(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a30ffecf-3a7e-48f8-426e-bc31025a80eb)\n");
    REQUIRE(list.size() == 1);
    CHECK(list[0].name == "NVIDIA H100 80GB HBM3");
    CHECK(list[0].uuid == "GPU-a30ffecf-3a7e-48f8-426e-bc31025a80eb");
    CHECK(list[0].slices.empty());
    const auto plan = plan_workers(std::nullopt, a, list);
    CHECK(plan.workers == 1);
    CHECK(plan.devices == std::vector<std::string>{"0"});
    REQUIRE(plan.accelerator);
    CHECK(plan.accelerator->to_string() == "H100");
}

TEST_CASE("metrics: GPU device names map onto accelerators", "[metrics]") {
    auto two =
        parse_nvidia_smi_devices("NVIDIA A100-SXM4-40GB, 40960\nNVIDIA A100-SXM4-40GB, 40960\n");
    REQUIRE(two);
    CHECK(two->name == "A100");
    CHECK(two->memory == "40GB");
    CHECK(two->count == 2);
    auto name = [](const char* n, double mib = 0) {
        auto a = parse_nvidia_smi_devices(std::string(n) + ", " + std::to_string(mib) + "\n");
        return a ? a->to_string() : std::string("(none)");
    };
    CHECK(name("Tesla T4", 15360) == "T4");
    CHECK(name("NVIDIA A10G", 23028) == "A10G");
    CHECK(name("NVIDIA L4", 23034) == "L4");
    CHECK(name("NVIDIA L40S", 46068) == "L40S");
    CHECK(name("NVIDIA H100 NVL", 95830) == "H100-94GB");
    CHECK(name("Tesla V100-SXM2-32GB", 32768) == "V100-32GB");
    CHECK(name("NVIDIA GeForce RTX 4090", 24564) == "RTX4090");
    CHECK(name("NVIDIA RTX A6000", 49140) == "RTXA6000");
    CHECK(name("NVIDIA RTX 6000 Ada Generation", 49140) == "RTX6000-Ada");
    CHECK(name("NVIDIA Quadro P1000", 4096) == "(none)");
    CHECK_FALSE(parse_nvidia_smi_devices(""));
}
