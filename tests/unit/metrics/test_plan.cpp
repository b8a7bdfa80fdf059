// nvidia-smi -L parsing and the plan of worker processes per node (api.md §11).
#include <catch2/catch.hpp>

#include "metrics/metrics.hpp"

using namespace sky::detail;

namespace {
const char* four_h100 =
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5b0d6a4e-9c1e-3f7a-8d2b-1a6c0e4f9b31)\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-0c3f8e21-7a45-b9d6-2e1f-83c4d5a6b7e8)\n"
    "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-9e7d6c5b-4a39-2817-f6e5-d4c3b2a19087)\n"
    "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718)\n";
const char* mig_a100 =
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
    "  MIG 3g.40gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
    "  MIG 3g.40gb     Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
    "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-2f0c4e8a-61b3-4d7e-9a5c-0b1d2e3f4a5b)\n"
    "  MIG 1g.10gb     Device  0: (UUID: MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d)\n"
    "  MIG 3g.40gb     Device  1: (UUID: MIG-6e7f8a9b-0c1d-5e2f-a3b4-c5d6e7f8a9b0)\n";
}  // namespace

TEST_CASE("nvidia-smi -L: GPUs with their UUIDs and MIG slices", "[distributed][metrics]") {
    auto gpus = parse_nvidia_smi_list(four_h100);
    REQUIRE(gpus.size() == 4);
    CHECK(gpus[0].index == 0);
    CHECK(gpus[0].name == "NVIDIA H100 80GB HBM3");
    CHECK(gpus[3].uuid == "GPU-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718");
    CHECK(gpus[2].slices.empty());

    auto mig = parse_nvidia_smi_list(mig_a100);
    REQUIRE(mig.size() == 2);
    REQUIRE(mig[0].slices.size() == 2);
    CHECK(mig[0].slices[1].profile == "3g.40gb");
    CHECK(mig[0].slices[1].uuid == "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb");
    CHECK(mig[1].slices[0].profile == "1g.10gb");

    CHECK(parse_nvidia_smi_list("").empty());
    CHECK(parse_nvidia_smi_list("No devices were found\n").empty());
    CHECK(parse_nvidia_smi_list("GPU x: broken\n  MIG 1g.5gb\n").empty());
}

TEST_CASE("worker plan: one per GPU of the request, pinned by index", "[distributed][metrics]") {
    auto p = plan_workers(sky::Accelerator::parse("H100:8"), std::nullopt, {});
    CHECK(p.workers == 8);
    CHECK(p.devices == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
    CHECK(p.accelerator == sky::Accelerator::parse("H100:8"));

    auto one = plan_workers(sky::Accelerator::parse("T4"), std::nullopt, {});
    CHECK(one.workers == 1);
    CHECK(one.devices == std::vector<std::string>{"0"});
}

TEST_CASE("worker plan: a MIG request takes the listed slices of its profile first",
          "[distributed][metrics]") {
    auto req = sky::Accelerator::parse("A100-80GB@3g.40gb:2");  // 2 GPUs x 2 slices
    auto p = plan_workers(req, std::nullopt, parse_nvidia_smi_list(mig_a100));
    REQUIRE(p.workers == 4);
    CHECK(p.devices[0] == "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f");
    CHECK(p.devices[2] == "MIG-6e7f8a9b-0c1d-5e2f-a3b4-c5d6e7f8a9b0");  // the 3g.40gb ones first
    CHECK(p.devices[3] == "MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d");
    // One GPU's worth: the first two slices of the profile.
    auto half = plan_workers(sky::Accelerator::parse("A100-80GB@3g.40gb"), std::nullopt,
                             parse_nvidia_smi_list(mig_a100));
    CHECK(half.workers == 2);
    // Nothing listed (no nvidia-smi): W from the profile, pinned to the GPU by index.
    auto blind = plan_workers(req, std::nullopt, {});
    CHECK(blind.workers == 4);
    CHECK(blind.devices == std::vector<std::string>{"0", "0", "1", "1"});
}

TEST_CASE("worker plan: detected from nvidia-smi when the spec names nothing",
          "[distributed][metrics]") {
    auto det = parse_nvidia_smi_devices(
        "NVIDIA H100 80GB HBM3, 81559\nNVIDIA H100 80GB HBM3, 81559\n"
        "NVIDIA H100 80GB HBM3, 81559\nNVIDIA H100 80GB HBM3, 81559\n");
    REQUIRE(det);
    auto p = plan_workers(std::nullopt, det, parse_nvidia_smi_list(four_h100));
    CHECK(p.workers == 4);
    CHECK(p.devices == std::vector<std::string>{"0", "1", "2", "3"});
    REQUIRE(p.accelerator);
    CHECK(p.accelerator->to_string() == "H100:4");

    auto det_mig =
        parse_nvidia_smi_devices("NVIDIA A100-SXM4-80GB, 81920\nNVIDIA A100-SXM4-80GB, 81920\n");
    auto m = plan_workers(std::nullopt, det_mig, parse_nvidia_smi_list(mig_a100));
    CHECK(m.workers == 4);  // every listed slice
    REQUIRE(m.accelerator);
    CHECK(m.accelerator->mig == std::optional<std::string>("3g.40gb"));
    CHECK(m.accelerator->count == 2);
    CHECK(sky::Accelerator::parse(m.accelerator->to_string()) == *m.accelerator);  // lossless

    // A CPU node, and a non-NVIDIA accelerator: one worker, CUDA_VISIBLE_DEVICES untouched.
    auto cpu = plan_workers(std::nullopt, std::nullopt, {});
    CHECK(cpu.workers == 1);
    CHECK(cpu.devices.empty());
    CHECK(!cpu.accelerator);
    auto trn = plan_workers(sky::accelerators::Trainium({.count = 16}), std::nullopt, {});
    CHECK(trn.workers == 1);
    CHECK(trn.devices.empty());
}

TEST_CASE("plan: per-GPU workers take the GPUs a scheduler gave the job",
          "[distributed][metrics]") {
    const auto plan = plan_workers(sky::Accelerator::parse("H100:2"), std::nullopt, {});
    REQUIRE(plan.devices == std::vector<std::string>{"0", "1"});
    // Slurm gave this job GPUs 2 and 3 of the node.
    auto p = pin_to_visible(plan, "2,3");
    CHECK(p.devices == std::vector<std::string>{"2", "3"});
    CHECK(p.workers == 2);
    // Fewer GPUs visible than asked for: one worker per GPU there is.
    p = pin_to_visible(plan_workers(sky::Accelerator::parse("H100:4"), std::nullopt, {}), "5");
    CHECK(p.devices == std::vector<std::string>{"5"});
    CHECK(p.workers == 1);
    // Nothing to pin: an empty list, MIG slices (UUIDs), a CPU node.
    CHECK(pin_to_visible(plan, "").devices == plan.devices);
    CHECK(pin_to_visible(plan, " , ").devices == plan.devices);
    const auto mig = plan_workers(sky::Accelerator::parse("A100@3g.40gb"), std::nullopt,
                                  parse_nvidia_smi_list(mig_a100));
    CHECK(pin_to_visible(mig, "0,1").devices == mig.devices);
    const auto cpu = plan_workers(std::nullopt, std::nullopt, {});
    CHECK(pin_to_visible(cpu, "0").workers == 1);
    CHECK(pin_to_visible(cpu, "0").devices.empty());
}
