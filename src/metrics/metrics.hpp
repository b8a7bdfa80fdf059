#pragma once
// Metrics sampling on a node (the numbers of the Metrics event, api.md §9): CPU from /proc/stat,
// memory from /proc/meminfo, GPUs from nvidia-smi. Parsers take text so they can be unit-tested;
// MetricsSampler reads the real sources.
#include <chrono>
#include <optional>
#include <sky/accelerator.hpp>
#include <string>
#include <string_view>

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

/// One sample, shaped like the Metrics event.
struct MetricsSample {
    double cpu_percent = 0;
    double memory_percent = 0;
    double memory_used_mb = 0;
    double memory_total_mb = 0;
    std::optional<double> gpu_utilization;
    std::optional<double> gpu_memory_used_mb;
    std::optional<double> gpu_memory_total_mb;
    std::optional<double> gpu_temperature;

    /// The payload of a metrics frame.
    template <class Archive>
    void serialize(Archive& ar) {
        ar(cpu_percent, memory_percent, memory_used_mb, memory_total_mb, gpu_utilization,
           gpu_memory_used_mb, gpu_memory_total_mb, gpu_temperature);
    }
};

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

    /// CPU % since the previous call (or since construction), memory and GPU now.
    MetricsSample sample();

private:
    Options options_;
    std::optional<std::string> smi_;
    std::optional<CpuTimes> last_cpu_;
};

}  // namespace sky::detail
