// Metrics parsers and the sampler (see metrics.hpp).
#include "metrics/metrics.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "catalog/names.hpp"
#include "util/file.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace sky::detail {
namespace {

template <class F>
void for_each_line(std::string_view text, F&& f) {
    while (!text.empty()) {
        const auto nl = text.find('\n');
        f(text.substr(0, nl));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

std::optional<double> to_double(std::string_view s) {
    s = trim(s);
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

}  // namespace

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
    std::optional<CpuTimes> out;
    for_each_line(text, [&](std::string_view line) {
        if (out || !line.starts_with("cpu ")) return;
        line.remove_prefix(4);
        std::vector<unsigned long long> v;
        while (!line.empty()) {
            line = trim(line);
            if (line.empty()) break;
            unsigned long long x = 0;
            auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), x);
            if (ec != std::errc{}) return;
            v.push_back(x);
            line.remove_prefix(static_cast<std::size_t>(p - line.data()));
        }
        if (v.size() < 4) return;
        v.resize(8, 0);  // user nice system idle iowait irq softirq steal (guest is in user)
        CpuTimes t;
        t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        t.total = t.busy + v[3] + v[4];
        out = t;
    });
    return out;
}

double cpu_percent(const CpuTimes& before, const CpuTimes& after) {
    if (after.total <= before.total || after.busy < before.busy) return 0.0;
    const double busy = static_cast<double>(after.busy - before.busy);
    const double total = static_cast<double>(after.total - before.total);
    return std::clamp(100.0 * busy / total, 0.0, 100.0);
}

std::optional<MemoryUsage> parse_meminfo(std::string_view text) {
    std::optional<double> total, available, free, buffers, cached;
    for_each_line(text, [&](std::string_view line) {
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) return;
        const auto key = line.substr(0, colon);
        std::string_view rest = trim(line.substr(colon + 1));
        if (rest.ends_with("kB")) rest = trim(rest.substr(0, rest.size() - 2));
        const auto kb = to_double(rest);
        if (!kb) return;
        if (key == "MemTotal")
            total = *kb;
        else if (key == "MemAvailable")
            available = *kb;
        else if (key == "MemFree")
            free = *kb;
        else if (key == "Buffers")
            buffers = *kb;
        else if (key == "Cached")
            cached = *kb;
    });
    if (!total || *total <= 0) return std::nullopt;
    const double avail =
        available ? *available : free.value_or(0) + buffers.value_or(0) + cached.value_or(0);
    MemoryUsage m;
    m.total_mb = *total / 1024.0;
    m.used_mb = std::max(0.0, (*total - avail) / 1024.0);
    m.percent = 100.0 * m.used_mb / m.total_mb;
    return m;
}

GpuUsage parse_nvidia_smi(std::string_view text) {
    GpuUsage g;
    double util_sum = 0;
    int util_n = 0;
    for_each_line(text, [&](std::string_view line) {
        line = trim(line);
        if (line.empty()) return;
        std::vector<std::string_view> f;
        while (true) {
            const auto c = line.find(',');
            f.push_back(trim(line.substr(0, c)));
            if (c == std::string_view::npos) break;
            line.remove_prefix(c + 1);
        }
        if (f.size() != 4) return;
        const auto util = to_double(f[0]), used = to_double(f[1]), total = to_double(f[2]),
                   temp = to_double(f[3]);
        if (!util && !used && !total && !temp) return;  // not a data line
        ++g.gpus;
        if (util) util_sum += *util, ++util_n;
        if (used) g.memory_used_mb = g.memory_used_mb.value_or(0) + *used;
        if (total) g.memory_total_mb = g.memory_total_mb.value_or(0) + *total;
        if (temp) g.temperature = std::max(g.temperature.value_or(*temp), *temp);
    });
    if (util_n > 0) g.utilization = util_sum / util_n;
    return g;
}

std::optional<std::string> find_on_path(std::string_view name) {
    if (name.empty()) return std::nullopt;
    auto executable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (name.find('/') != std::string_view::npos) {
        std::string p(name);
        return executable(p) ? std::optional<std::string>(p) : std::nullopt;
    }
    const char* path = std::getenv("PATH");
    std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        const auto c = dirs.find(':');
        std::string dir(dirs.substr(0, c));
        if (dir.empty()) dir = ".";
        const std::string candidate = dir + "/" + std::string(name);
        if (executable(candidate)) return candidate;
        if (c == std::string_view::npos) break;
        dirs.remove_prefix(c + 1);
    }
    return std::nullopt;
}

std::optional<std::string> run_with_timeout(const std::string& program, std::string_view args,
                                            std::chrono::milliseconds timeout) {
    std::vector<std::string> argv{program};
    for (std::string_view a = args; !a.empty();) {
        const auto sp = a.find(' ');
        if (sp != 0) argv.emplace_back(a.substr(0, sp));
        if (sp == std::string_view::npos) break;
        a.remove_prefix(sp + 1);
    }
    // Far more than any GPU table: more means something is wrong, and counts as no answer.
    const auto r = run_subprocess(argv, {}, timeout, 1u << 20);
    if (r.timed_out || r.truncated || r.status != 0) return std::nullopt;
    return r.output;
}

std::optional<Accelerator> parse_nvidia_smi_devices(std::string_view text) {
    std::optional<Accelerator> first;
    std::string first_name;
    int count = 0;
    for_each_line(text, [&](std::string_view line) {
        line = trim(line);
        const auto comma = line.rfind(',');
        const std::string_view name = trim(line.substr(0, comma));
        if (name.empty()) return;
        const double mib =
            comma == std::string_view::npos ? 0 : to_double(line.substr(comma + 1)).value_or(0);
        if (!first) {
            first = accelerator_from_device_name(name, mib, 1);
            if (first) first_name = std::string(name), count = 1;
        } else if (name == first_name) {
            ++count;
        }
    });
    if (first) first->count = count;
    return first;
}

std::optional<Accelerator> detect_nvidia_accelerator(std::chrono::milliseconds timeout) {
    const auto smi = find_on_path("nvidia-smi");
    if (!smi) return std::nullopt;
    const auto out = run_with_timeout(*smi, kNvidiaSmiDeviceArgs, timeout);
    return out ? parse_nvidia_smi_devices(*out) : std::nullopt;
}

std::vector<NvidiaGpu> parse_nvidia_smi_list(std::string_view text) {
    std::vector<NvidiaGpu> gpus;
    auto uuid_of = [](std::string_view line) -> std::string {
        const auto at = line.find("(UUID: ");
        if (at == std::string_view::npos) return {};
        auto rest = line.substr(at + 7);
        const auto end = rest.find(')');
        return end == std::string_view::npos ? std::string()
                                             : std::string(trim(rest.substr(0, end)));
    };
    for_each_line(text, [&](std::string_view raw) {
        const std::string_view line = trim(raw);
        if (line.rfind("GPU ", 0) == 0) {
            // "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"
            const auto colon = line.find(':');
            if (colon == std::string_view::npos) return;
            NvidiaGpu g;
            g.index = static_cast<int>(to_double(line.substr(4, colon - 4)).value_or(-1));
            if (g.index < 0) return;
            auto rest = line.substr(colon + 1);
            const auto paren = rest.find("(UUID:");
            g.name = std::string(trim(rest.substr(0, paren)));
            g.uuid = uuid_of(line);
            gpus.push_back(std::move(g));
        } else if (line.rfind("MIG ", 0) == 0 && !gpus.empty()) {
            // "MIG 3g.40gb     Device  0: (UUID: MIG-...)"
            auto rest = trim(line.substr(4));
            MigSlice m;
            m.profile = std::string(rest.substr(0, rest.find_first_of(" \t")));
            m.uuid = uuid_of(line);
            if (!m.profile.empty() && !m.uuid.empty()) gpus.back().slices.push_back(std::move(m));
        }
    });
    return gpus;
}

WorkerPlan plan_workers(const std::optional<Accelerator>& requested,
                        const std::optional<Accelerator>& detected,
                        const std::vector<NvidiaGpu>& listed) {
    WorkerPlan plan;
    std::vector<MigSlice> slices;
    for (const auto& g : listed) slices.insert(slices.end(), g.slices.begin(), g.slices.end());
    plan.accelerator = requested ? requested : detected;
    if (!requested && detected && !slices.empty()) {
        // The profile is part of what the node has; kept only when the catalog knows it, so that
        // the accelerator still parses back from its string.
        Accelerator a = *detected;
        int gpus = 0;
        for (const auto& g : listed) gpus += g.slices.empty() ? 0 : 1;
        a.count = std::max(1, gpus);
        a.mig = slices.front().profile;
        try {
            if (Accelerator::parse(a.to_string()) == a) plan.accelerator = a;
        } catch (const std::exception&) {
        }
    }
    const auto& acc = plan.accelerator;
    if (!acc || !is_nvidia(acc->name)) return plan;  // one worker; CUDA_VISIBLE_DEVICES untouched
    const bool mig = acc->mig.has_value() || (!requested && !slices.empty());
    if (mig) {
        const int per_gpu = acc->mig ? std::max(1, workers_per_device(*acc)) : 1;
        std::size_t want =
            requested ? static_cast<std::size_t>(std::max(1, acc->count) * per_gpu) : slices.size();
        if (!slices.empty()) {
            // Slices of the requested profile first, then any others the machine has.
            std::stable_partition(slices.begin(), slices.end(), [&](const MigSlice& s) {
                return acc->mig && s.profile == *acc->mig;
            });
            want = std::min(want, slices.size());
            for (std::size_t k = 0; k < want; ++k) plan.devices.push_back(slices[k].uuid);
        } else {
            for (std::size_t k = 0; k < want; ++k)
                plan.devices.push_back(std::to_string(k / static_cast<std::size_t>(per_gpu)));
        }
    } else {
        for (int k = 0; k < std::max(1, acc->count); ++k) plan.devices.push_back(std::to_string(k));
    }
    plan.workers = std::max<int>(1, static_cast<int>(plan.devices.size()));
    return plan;
}

WorkerPlan detect_worker_plan(const std::optional<Accelerator>& requested,
                              std::chrono::milliseconds timeout) {
    std::optional<Accelerator> detected;
    std::vector<NvidiaGpu> listed;
    const bool plain_gpus = requested && !requested->mig;
    if (!plain_gpus) {
        if (const auto smi = find_on_path("nvidia-smi")) {
            if (!requested)
                if (auto out = run_with_timeout(*smi, kNvidiaSmiDeviceArgs, timeout))
                    detected = parse_nvidia_smi_devices(*out);
            if (auto out = run_with_timeout(*smi, kNvidiaSmiListArgs, timeout))
                listed = parse_nvidia_smi_list(*out);
        }
    }
    WorkerPlan plan = plan_workers(requested, detected, listed);
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"))
        plan = pin_to_visible(std::move(plan), visible);
    return plan;
}

WorkerPlan pin_to_visible(WorkerPlan plan, std::string_view visible) {
    std::vector<std::string> list;
    for (std::size_t start = 0; start <= visible.size();) {
        const auto comma = std::min(visible.find(',', start), visible.size());
        const auto entry = trim(visible.substr(start, comma - start));
        if (!entry.empty()) list.emplace_back(entry);
        start = comma + 1;
    }
    const bool indices = !plan.devices.empty() &&
                         std::all_of(plan.devices.begin(), plan.devices.end(), [](const auto& d) {
                             return !d.empty() && d.size() < 7 &&
                                    std::all_of(d.begin(), d.end(), [](unsigned char c) {
                                        return std::isdigit(c) != 0;
                                    });
                         });
    if (list.empty() || !indices) return plan;
    std::vector<std::string> pinned;
    for (const auto& d : plan.devices) {
        const auto k = static_cast<std::size_t>(std::stoul(d));
        if (k < list.size()) pinned.push_back(list[k]);
    }
    if (pinned.empty()) return plan;
    plan.devices = std::move(pinned);
    plan.workers = static_cast<int>(plan.devices.size());
    return plan;
}

MetricsSampler::MetricsSampler(Options options) : options_(std::move(options)) {
    if (options_.gpu)
        smi_ =
            options_.nvidia_smi ? find_on_path(*options_.nvidia_smi) : find_on_path("nvidia-smi");
    if (auto stat = read_file(options_.proc_root + "/stat")) last_cpu_ = parse_proc_stat(*stat);
}

Metrics MetricsSampler::sample() {
    Metrics s;
    if (auto stat = read_file(options_.proc_root + "/stat")) {
        if (auto now = parse_proc_stat(*stat)) {
            if (last_cpu_) s.cpu_percent = cpu_percent(*last_cpu_, *now);
            last_cpu_ = now;
        }
    }
    if (auto mem = read_file(options_.proc_root + "/meminfo")) {
        if (auto m = parse_meminfo(*mem)) {
            s.memory_percent = m->percent;
            s.memory_used_mb = m->used_mb;
            s.memory_total_mb = m->total_mb;
        }
    }
    if (smi_) {
        if (auto out = run_with_timeout(*smi_, kNvidiaSmiArgs, options_.gpu_timeout)) {
            const auto g = parse_nvidia_smi(*out);
            if (g.gpus > 0) {
                s.gpu_utilization = g.utilization;
                s.gpu_memory_used_mb = g.memory_used_mb;
                s.gpu_memory_total_mb = g.memory_total_mb;
                s.gpu_temperature = g.temperature;
            }
        }
    }
    return s;
}

}  // namespace sky::detail
