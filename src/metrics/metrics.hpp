#pragma once
// Metrics sampling on a node (the numbers of the Metrics event, api.md §9): CPU from /proc/stat,
// memory from /proc/meminfo, GPUs from nvidia-smi. Parsers take text so they can be unit-tested;
// MetricsSampler reads the real sources. A sample is the public sky::Metrics event itself: the
// worker fills its numbers, the pool which node it came from.
#include <chrono>
#include <optional>
#include <sky/accelerator.hpp>
#include <sky/events.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail {

/// Cumulative CPU jiffies from the aggregate "cpu" line of /proc/stat.
struct CpuTimes {
    unsigned long long busy = 0;   ///< user+nice+system+irq+softirq+steal
    unsigned long long total = 0;  ///< busy + idle + iowait
};

/// Parses /proc/stat text; none when the "cpu " line is missing or malformed.
std::optional<CpuTimes> parse_proc_stat(std::string_view text);

/// CPU utilisation between two samples, 0..100 (0 when no time passed or the counters went back).
double cpu_percent(const CpuTimes& before, const CpuTimes& after);

/// Memory use from /proc/meminfo.
struct MemoryUsage {
    double used_mb = 0;   ///< MemTotal - MemAvailable (MiB)
    double total_mb = 0;  ///< MemTotal (MiB)
    double percent = 0;   ///< used / total × 100
};

/// Parses /proc/meminfo text; used = MemTotal − MemAvailable, or − (MemFree + Buffers + Cached)
/// on kernels without MemAvailable. None when MemTotal is missing.
std::optional<MemoryUsage> parse_meminfo(std::string_view text);

/// GPU numbers aggregated over every GPU of the node; all empty when there is no GPU data.
struct GpuUsage {
    int gpus = 0;                           ///< rows that parsed
    std::optional<double> utilization;      ///< mean utilization.gpu, percent
    std::optional<double> memory_used_mb;   ///< summed memory.used, MiB
    std::optional<double> memory_total_mb;  ///< summed memory.total, MiB
    std::optional<double> temperature;      ///< max temperature.gpu, °C
};

/// The nvidia-smi query whose output parse_nvidia_smi reads.
inline constexpr const char* kNvidiaSmiArgs =
    "--query-gpu=utilization.gpu,memory.used,memory.total,temperature.gpu "
    "--format=csv,noheader,nounits";

/// Parses the output of `nvidia-smi` with kNvidiaSmiArgs: one "util, used, total, temp" line per
/// GPU. A field reading "[N/A]" or "[Not Supported]" is skipped for that GPU; malformed lines are
/// ignored.
GpuUsage parse_nvidia_smi(std::string_view text);

/// Runs `program` with `args` (split on spaces), returning its stdout when it exits 0 within
/// `timeout`; none otherwise (not found, failed, or killed at the timeout). Never hangs.
std::optional<std::string> run_with_timeout(const std::string& program, std::string_view args,
                                            std::chrono::milliseconds timeout);

/// The full path of `name` on $PATH, if it is there and executable.
std::optional<std::string> find_on_path(std::string_view name);

/// The nvidia-smi query whose output parse_nvidia_smi_devices reads.
inline constexpr const char* kNvidiaSmiDeviceArgs =
    "--query-gpu=name,memory.total --format=csv,noheader,nounits";

/// The node's accelerator from `nvidia-smi` output with kNvidiaSmiDeviceArgs ("NVIDIA H100 80GB
/// HBM3, 81559" per GPU): the first GPU's model and memory, counted over the GPUs with that name.
/// None when no line names a known model.
std::optional<Accelerator> parse_nvidia_smi_devices(std::string_view text);

/// Runs nvidia-smi (if on PATH, killed after `timeout`) and parses its device list. For the
/// worker: export the result as SKY_ACCELERATOR (Accelerator::to_string) when the pool gave none.
std::optional<Accelerator> detect_nvidia_accelerator(
    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

/// The argument of `nvidia-smi` that lists GPUs and their MIG slices, one per line:
///   GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)
///     MIG 3g.40gb     Device  0: (UUID: MIG-...)
inline constexpr const char* kNvidiaSmiListArgs = "-L";

/// One MIG slice of a GPU, as `nvidia-smi -L` lists it.
struct MigSlice {
    std::string profile;  ///< e.g. "3g.40gb"
    std::string uuid;     ///< "MIG-..." (what CUDA_VISIBLE_DEVICES takes)
};
/// One GPU of `nvidia-smi -L`, with its MIG slices (none when MIG is off).
struct NvidiaGpu {
    int index = 0;
    std::string name;  ///< "NVIDIA H100 80GB HBM3"
    std::string uuid;  ///< "GPU-..."
    std::vector<MigSlice> slices;
};
/// Parses `nvidia-smi -L`; lines it does not recognise are skipped.
std::vector<NvidiaGpu> parse_nvidia_smi_list(std::string_view text);

/// How a node's worker processes sit on its devices (api.md §11, "Workers per node").
struct WorkerPlan {
    int workers = 1;  ///< W
    /// CUDA_VISIBLE_DEVICES of each worker process (GPU index or MIG slice UUID); empty: the
    /// node has no NVIDIA GPU and the variable is left alone.
    std::vector<std::string> devices;
    /// The node's accelerator: the requested one, else the detected one; none on a CPU node.
    std::optional<Accelerator> accelerator;
};

/// The plan for a node: one worker per GPU of the requested accelerator (pinned by index), one
/// per MIG slice for a MIG accelerator (pinned by the slice UUIDs `listed`, the first
/// count × workers_per_device of them, preferring slices of the requested profile; by GPU index
/// when none are listed), else 1. Without a request, the detected accelerator (`detected`, from
/// kNvidiaSmiDeviceArgs) with the MIG profile of the listed slices decides: one worker per
/// listed slice, else one per GPU. Non-NVIDIA accelerators get one worker.
WorkerPlan plan_workers(const std::optional<Accelerator>& requested,
                        const std::optional<Accelerator>& detected,
                        const std::vector<NvidiaGpu>& listed);

/// The plan on the GPUs a scheduler gave this process, as `visible` (CUDA_VISIBLE_DEVICES,
/// e.g. Slurm's "2,3" for a job with two of a node's GPUs) lists them: worker k gets the list's
/// k-th entry, and there are no more workers than entries. A plan of MIG slices (UUIDs) or
/// without devices, or an empty list, stays as it is.
WorkerPlan pin_to_visible(WorkerPlan plan, std::string_view visible);

/// Runs nvidia-smi where needed (not at all for a plain GPU request) and plans; on the GPUs of
/// CUDA_VISIBLE_DEVICES when this process's environment has it (pin_to_visible).
WorkerPlan detect_worker_plan(const std::optional<Accelerator>& requested,
                              std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

/// Samples this machine. Construct once per worker; call sample() every poll interval.
class MetricsSampler {
public:
    struct Options {
        std::string proc_root = "/proc";              ///< where stat and meminfo are read
        std::optional<std::string> nvidia_smi;        ///< path; none = search "nvidia-smi" on PATH
        std::chrono::milliseconds gpu_timeout{2000};  ///< nvidia-smi is killed after this
        bool gpu = true;                              ///< false = never run nvidia-smi
    };

    MetricsSampler() : MetricsSampler(Options{}) {}
    explicit MetricsSampler(Options options);

    /// CPU % since the previous call (or since construction), memory and GPU now; the event's
    /// instance_id and node are left for the pool to fill in.
    Metrics sample();

private:
    Options options_;
    std::optional<std::string> smi_;
    std::optional<CpuTimes> last_cpu_;
};

}  // namespace sky::detail

namespace sky::inline v0 {

/// The payload of a metrics frame (worker to client): a Metrics event's numbers, not which node
/// it is (the client knows that). Found by cereal through argument-dependent lookup.
template <class Archive>
void serialize(Archive& ar, Metrics& m) {
    ar(m.cpu_percent, m.memory_percent, m.memory_used_mb, m.memory_total_mb, m.gpu_utilization,
       m.gpu_memory_used_mb, m.gpu_memory_total_mb, m.gpu_temperature);
}

}  // namespace sky::inline v0
