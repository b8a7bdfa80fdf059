// Accelerator names, catalog facts, MIG tables and parsing (api.md §7).
//
// Facts here are public specifications as known in early 2025 (memory per device, architecture,
// the CUDA toolkit range that supports the compute capability). CUDA minimums are those of the
// compute capability (sm_70 Volta: 9.0, sm_75 Turing: 10.0, sm_80 A100: 11.0, sm_86: 11.1,
// sm_89 Ada: 11.8, sm_90 Hopper: 11.8, sm_100 Blackwell: 12.8); CUDA 13.0 dropped Volta, so V100's
// maximum is 12.9. GH200's minimum is given as 12.0 (Grace is arm64 SBSA) and is less certain.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sky/accelerator.hpp>
#include <sky/errors.hpp>
#include <string>
#include <vector>

#include "catalog/names.hpp"
#include "catalog/text.hpp"

namespace sky::inline v0 {
namespace {

struct Model {
    AcceleratorInfo info;
    bool has_factory;  // named in the seeds (the rest exist for catalog rows and suggestions)
};

std::optional<std::string> opt(const char* s) {
    return s ? std::optional<std::string>(s) : std::nullopt;
}

Model nvidia(const char* name, const char* arch, std::vector<int> mem, std::optional<int> def,
             const char* cuda_min, const char* cuda_max = nullptr, bool factory = true) {
    return {{name, "NVIDIA", arch, std::move(mem), def, opt(cuda_min), opt(cuda_max)}, factory};
}

Model other(const char* name, const char* maker, const char* arch, int mem) {
    return {{name, maker, arch, {mem}, mem, std::nullopt, std::nullopt}, true};
}

const std::vector<Model>& models() {
    static const std::vector<Model> table = [] {
        std::vector<Model> t;
        // NVIDIA, every name in the seeds.
        t.push_back(nvidia("H100", "Hopper", {80, 94}, 80, "11.8"));
        t.push_back(nvidia("H200", "Hopper", {141}, 141, "11.8"));
        t.push_back(nvidia("A100", "Ampere", {40, 80}, std::nullopt, "11.0"));
        t.push_back(nvidia("B100", "Blackwell", {192}, 192, "12.8"));
        t.push_back(nvidia("B200", "Blackwell", {192}, 192, "12.8"));
        t.push_back(nvidia("GB200", "Blackwell", {384}, 384, "12.8"));
        t.push_back(nvidia("GH200", "Hopper", {96, 144}, 96, "12.0"));
        t.push_back(nvidia("L4", "Ada Lovelace", {24}, 24, "11.8"));
        t.push_back(nvidia("L40", "Ada Lovelace", {48}, 48, "11.8"));
        t.push_back(nvidia("L40S", "Ada Lovelace", {48}, 48, "11.8"));
        t.push_back(nvidia("T4", "Turing", {16}, 16, "10.0"));
        t.push_back(nvidia("A10", "Ampere", {24}, 24, "11.1"));
        t.push_back(nvidia("A10G", "Ampere", {24}, 24, "11.1"));
        t.push_back(nvidia("V100", "Volta", {16, 32}, std::nullopt, "9.0", "12.9"));
        // NVIDIA cards that marketplaces (RunPod, Vast.ai, DigitalOcean) rent; no factory.
        t.push_back(nvidia("A40", "Ampere", {48}, 48, "11.1", nullptr, false));
        t.push_back(nvidia("RTXA6000", "Ampere", {48}, 48, "11.1", nullptr, false));
        t.push_back(nvidia("RTX3090", "Ampere", {24}, 24, "11.1", nullptr, false));
        t.push_back(nvidia("RTX4090", "Ada Lovelace", {24}, 24, "11.8", nullptr, false));
        t.push_back(nvidia("RTX4000-Ada", "Ada Lovelace", {20}, 20, "11.8", nullptr, false));
        t.push_back(nvidia("RTX6000-Ada", "Ada Lovelace", {48}, 48, "11.8", nullptr, false));
        t.push_back(nvidia("RTX5090", "Blackwell", {32}, 32, "12.8", nullptr, false));
        // AWS chips (memory per chip).
        t.push_back(other("Trainium", "AWS", "Trainium", 32));
        t.push_back(other("Trainium2", "AWS", "Trainium2", 96));
        t.push_back(other("Inferentia", "AWS", "Inferentia", 8));
        t.push_back(other("Inferentia2", "AWS", "Inferentia2", 32));
        // Google TPUs (HBM per chip).
        t.push_back(other("TPU-v4", "Google", "TPU v4", 32));
        t.push_back(other("TPU-v5e", "Google", "TPU v5e", 16));
        t.push_back(other("TPU-v5p", "Google", "TPU v5p", 95));
        t.push_back(other("TPU-v6e", "Google", "TPU v6e", 32));
        // AMD Instinct.
        t.push_back(other("MI100", "AMD", "CDNA", 32));
        t.push_back(other("MI210", "AMD", "CDNA2", 64));
        t.push_back(other("MI250", "AMD", "CDNA2", 128));
        t.push_back(other("MI250X", "AMD", "CDNA2", 128));
        t.push_back(other("MI300A", "AMD", "CDNA3", 128));
        t.push_back(other("MI300X", "AMD", "CDNA3", 192));
        t.push_back(other("MI325X", "AMD", "CDNA3", 256));
        t.push_back(other("MI355X", "AMD", "CDNA4", 288));
        return t;
    }();
    return table;
}

// Spellings that are not "<name>" or "<name>-<N>GB": form factors and version suffixes.
struct Alias {
    const char* spelling;
    const char* name;
    std::optional<int> memory_gb;
};
const Alias kAliases[] = {
    {"H100-SXM", "H100", 80},    {"H100-SXM5", "H100", 80},     {"H100-PCIe", "H100", 80},
    {"H100-NVL", "H100", 94},    {"Trainium1", "Trainium", {}}, {"Inferentia1", "Inferentia", {}},
    {"A10-24GB", "A10", 24},     {"RTX-A6000", "RTXA6000", {}}, {"RTX-4090", "RTX4090", {}},
    {"RTX-3090", "RTX3090", {}}, {"RTX-5090", "RTX5090", {}},
};

// MIG tables from seed 002 (A100/H100 80 GB and A100 40 GB). 7g.40gb on the 40 GB A100 is not
// in the seed but is in NVIDIA's MIG user guide (the whole GPU as one instance).
const std::vector<MigProfile>& mig_80gb() {
    static const std::vector<MigProfile> t = {{"1g.10gb", 7, 10}, {"1g.20gb", 4, 20},
                                              {"2g.20gb", 3, 20}, {"3g.40gb", 2, 40},
                                              {"4g.40gb", 1, 40}, {"7g.80gb", 1, 80}};
    return t;
}
const std::vector<MigProfile>& mig_a100_40gb() {
    static const std::vector<MigProfile> t = {{"1g.5gb", 7, 5},
                                              {"2g.10gb", 3, 10},
                                              {"3g.20gb", 2, 20},
                                              {"4g.20gb", 1, 20},
                                              {"7g.40gb", 1, 40}};
    return t;
}

const Model* find_model(std::string_view name) {
    for (const auto& m : models())
        if (detail::iequals(m.info.name, name)) return &m;
    return nullptr;
}

std::string memory_label(int gb) { return std::to_string(gb) + "GB"; }

struct Resolved {
    const Model* model = nullptr;
    std::string name;  // canonical (a TPU slice keeps its topology: "TPU-v5p-8")
    std::optional<int> memory_gb;
};

[[noreturn]] void unknown(std::string_view name) {
    auto near = detail::nearest(name, known_accelerators());
    std::string msg = "accelerator: unknown name '" + std::string(name) + "'";
    if (!near.empty()) msg += "; did you mean " + detail::join_or(near) + "?";
    msg += " (sky catalog lists the offers; sky::known_accelerators() every name)";
    throw ConfigError(msg);
}

int pick_variant(const Model& m, double gb, std::string_view original) {
    for (int v : m.info.memory_gb)
        if (std::fabs(v - gb) < 0.5) return v;
    std::vector<std::string> sizes;
    for (int v : m.info.memory_gb) sizes.push_back(memory_label(v));
    throw ConfigError("accelerator: " + m.info.name + " has no " + std::string(original) +
                      " variant; it comes in " + detail::join_or(sizes));
}

std::optional<Resolved> try_resolve(std::string_view raw) {
    const std::string_view name = detail::trim(raw);
    if (name.empty()) return std::nullopt;
    if (const Model* m = find_model(name)) return Resolved{m, m->info.name, std::nullopt};
    for (const auto& a : kAliases)
        if (detail::iequals(a.spelling, name)) {
            const Model* m = find_model(a.name);
            return Resolved{m, m->info.name, a.memory_gb};
        }
    // "<name>-<N>GB"
    const auto dash = name.rfind('-');
    if (dash != std::string_view::npos && dash > 0) {
        const std::string_view base = name.substr(0, dash);
        const std::string suffix = detail::to_lower(name.substr(dash + 1));
        if (suffix.size() > 2 && suffix.ends_with("gb")) {
            if (const Model* m = find_model(base)) {
                int gb = 0;
                const auto* b = suffix.data();
                auto [p, ec] = std::from_chars(b, b + suffix.size() - 2, gb);
                if (ec == std::errc{} && p == b + suffix.size() - 2)
                    return Resolved{m, m->info.name, pick_variant(*m, gb, name.substr(dash + 1))};
            }
        }
        // TPU slice: "TPU-v5p-8" (also "v5p-8").
        std::string_view gen = base;
        if (gen.size() > 4 && detail::iequals(gen.substr(0, 4), "TPU-")) gen.remove_prefix(4);
        if (const Model* m = find_model("TPU-" + std::string(gen))) {
            int cores = 0;
            const auto rest = name.substr(dash + 1);
            auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), cores);
            if (ec == std::errc{} && p == rest.data() + rest.size() && cores > 0)
                return Resolved{m, m->info.name + "-" + std::string(rest), std::nullopt};
        }
    }
    return std::nullopt;
}

// try_resolve for questions about a name: a known family with an unknown size ("V100-22GB") is
// no match rather than a ConfigError.
std::optional<Resolved> try_resolve_quietly(std::string_view name) {
    try {
        return try_resolve(name);
    } catch (const ConfigError&) {
        return std::nullopt;
    }
}

Resolved resolve(std::string_view name) {
    if (auto r = try_resolve(name)) return *r;
    unknown(detail::trim(name));
}

Accelerator build(const Resolved& r, int count) {
    Accelerator a;
    a.name = r.name;
    const auto& info = r.model->info;
    if (r.memory_gb)
        a.memory = memory_label(*r.memory_gb);
    else if (info.default_memory_gb)
        a.memory = memory_label(*info.default_memory_gb);
    a.count = count;
    a.manufacturer = info.manufacturer;
    a.architecture = info.architecture;
    a.cuda_min = info.cuda_min;
    a.cuda_max = info.cuda_max;
    return a;
}

void apply_mig(Accelerator& a, const Model& m, std::string_view profile, bool memory_given) {
    const std::string p = detail::to_lower(detail::trim(profile));
    std::vector<std::string> all;
    for (int gb : m.info.memory_gb) {
        if (memory_given && a.memory && memory_label(gb) != *a.memory) continue;
        for (const auto& prof : mig_profiles(m.info.name, gb)) {
            all.push_back(prof.name);
            if (prof.name == p) {
                a.mig = p;
                a.memory = memory_label(gb);
                return;
            }
        }
    }
    if (all.empty())
        throw ConfigError("accelerator: " + m.info.name + (a.memory ? " " + *a.memory : "") +
                          " has no MIG profiles (mig = '" + std::string(profile) + "')");
    throw ConfigError("accelerator: MIG profile '" + std::string(profile) + "' does not exist on " +
                      m.info.name + (memory_given && a.memory ? " " + *a.memory : "") +
                      "; profiles: " + detail::join_or(all));
}

void check_count(int count, std::string_view spec) {
    if (count < 1 || count > 1024)
        throw ConfigError("accelerator: count must be between 1 and 1024, got " +
                          std::to_string(count) + " in '" + std::string(spec) + "'");
}

}  // namespace

const AcceleratorInfo& accelerator_info(std::string_view name) { return resolve(name).model->info; }

std::vector<std::string> known_accelerators() {
    std::vector<std::string> out;
    for (const auto& m : models()) out.push_back(m.info.name);
    return out;
}

std::vector<MigProfile> mig_profiles(std::string_view gpu, int memory_gb) {
    const auto r = resolve(gpu);
    const auto& info = r.model->info;
    int gb = memory_gb;
    if (gb == 0) gb = r.memory_gb.value_or(info.default_memory_gb.value_or(info.memory_gb.back()));
    if (info.name == "H100" && gb == 80) return mig_80gb();
    if (info.name == "A100" && gb == 80) return mig_80gb();
    if (info.name == "A100" && gb == 40) return mig_a100_40gb();
    return {};
}

int workers_per_device(const Accelerator& acc) {
    if (!acc.mig) return 1;
    const int gb = acc.memory ? static_cast<int>(std::lround(parse_memory_gb(*acc.memory))) : 0;
    for (const auto& p : mig_profiles(acc.name, gb))
        if (p.name == *acc.mig) return p.workers;
    throw ConfigError("accelerator: MIG profile '" + *acc.mig + "' does not exist on " + acc.name);
}

bool is_nvidia(std::string_view name) {
    auto r = try_resolve_quietly(name.substr(0, name.find_first_of(":@")));
    return r && r->model->info.manufacturer == "NVIDIA";
}

bool is_trainium(std::string_view name) {
    auto r = try_resolve_quietly(name.substr(0, name.find_first_of(":@")));
    return r && r->model->info.architecture.starts_with("Trainium");
}

std::optional<Accelerator> current_accelerator() {
    const char* v = std::getenv("SKY_ACCELERATOR");
    if (!v || !*v) return std::nullopt;
    try {
        return Accelerator::parse(v);
    } catch (const Error&) {
        return std::nullopt;
    }
}

double parse_memory_gb(std::string_view text, std::string_view option) {
    const std::string_view t = detail::trim(text);
    auto bad = [&](const char* why) -> ConfigError {
        return ConfigError(std::string(option) + ": cannot parse '" + std::string(text) +
                           "' as a memory size (" + why + "; e.g. \"32GB\", \"512MB\")");
    };
    std::size_t i = 0;
    while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
    if (i == 0) throw bad("no number");
    double value = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + i, value);
    if (ec != std::errc{} || p != t.data() + i || !std::isfinite(value)) throw bad("bad number");
    const std::string unit = detail::to_lower(detail::trim(t.substr(i)));
    if (unit.empty() || unit == "g" || unit == "gb" || unit == "gib") return value;
    if (unit == "m" || unit == "mb" || unit == "mib") return value / 1024.0;
    if (unit == "t" || unit == "tb" || unit == "tib") return value * 1024.0;
    if (unit == "k" || unit == "kb" || unit == "kib") return value / (1024.0 * 1024.0);
    throw bad("unknown unit");
}

Accelerator Accelerator::parse(std::string_view spec) {
    std::string_view s = detail::trim(spec);
    int count = 1;
    if (const auto colon = s.rfind(':'); colon != std::string_view::npos) {
        const std::string_view n = detail::trim(s.substr(colon + 1));
        auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
        if (n.empty() || ec != std::errc{} || p != n.data() + n.size())
            throw ConfigError("accelerator: bad count '" + std::string(n) + "' in '" +
                              std::string(spec) + "' (expected NAME[:COUNT], e.g. \"H100:8\")");
        check_count(count, spec);
        s = s.substr(0, colon);
    }
    std::optional<std::string> mig;
    if (const auto at = s.find('@'); at != std::string_view::npos) {
        mig = std::string(detail::trim(s.substr(at + 1)));
        s = s.substr(0, at);
    }
    if (detail::trim(s).empty())
        throw ConfigError("accelerator: empty name in '" + std::string(spec) + "'");
    const auto r = resolve(s);
    Accelerator a = build(r, count);
    if (mig) apply_mig(a, *r.model, *mig, r.memory_gb.has_value());
    return a;
}

std::string Accelerator::to_string() const {
    std::string out = name;
    // Memory appears only when it differs from what the bare name implies.
    if (memory && !mig) {
        if (auto r = try_resolve(name)) {
            const auto def = r->model->info.default_memory_gb;
            if (!def || memory_label(*def) != *memory) out += "-" + *memory;
        }
    }
    if (mig) out += "@" + *mig;
    if (count != 1) out += ":" + std::to_string(count);
    return out;
}

namespace accelerators {

Accelerator make(std::string_view name, const Options& o) {
    const auto r = resolve(name);
    check_count(o.count, name);
    Accelerator a = build(r, o.count);
    bool memory_given = r.memory_gb.has_value();
    if (o.memory) {
        const int gb =
            pick_variant(*r.model, parse_memory_gb(*o.memory, "accelerator memory"), *o.memory);
        a.memory = memory_label(gb);
        memory_given = true;
    }
    if (o.mig) apply_mig(a, *r.model, *o.mig, memory_given);
    return a;
}

Accelerator Trainium(const ChipOptions& o) {
    if (o.version != 1 && o.version != 2)
        throw ConfigError("accelerator: Trainium version must be 1 or 2, got " +
                          std::to_string(o.version));
    return make(o.version == 1 ? "Trainium" : "Trainium2", {.count = o.count});
}

Accelerator Inferentia(const ChipOptions& o) {
    if (o.version != 1 && o.version != 2)
        throw ConfigError("accelerator: Inferentia version must be 1 or 2, got " +
                          std::to_string(o.version));
    return make(o.version == 1 ? "Inferentia" : "Inferentia2", {.count = o.count});
}

Accelerator TPU(const TpuOptions& o) { return make("TPU-" + o.version, {.count = o.count}); }

Accelerator TPUSlice(std::string_view slice) {
    std::string s(detail::trim(slice));
    if (!(s.size() > 4 && detail::iequals(s.substr(0, 4), "TPU-"))) s = "TPU-" + s;
    auto r = try_resolve(s);
    if (!r || r->name == r->model->info.name)
        throw ConfigError("accelerator: bad TPU slice '" + std::string(slice) +
                          "' (expected GENERATION-SIZE, e.g. \"v5p-8\")");
    return build(*r, 1);
}

Accelerator MI(std::string_view model, const Options& o) {
    return make("MI" + std::string(detail::trim(model)), o);
}

}  // namespace accelerators

namespace detail {
std::optional<std::string> canonical_accelerator_name(std::string_view name) {
    if (auto r = try_resolve_quietly(name)) return r->name;
    return std::nullopt;
}

std::optional<Accelerator> accelerator_from_device_name(std::string_view device_name,
                                                        double memory_mib, int count) {
    // Tokens of the name, upper-cased, split on spaces, dashes and underscores.
    std::vector<std::string> tokens;
    std::string cur;
    for (char c : device_name) {
        if (c == ' ' || c == '-' || c == '_' || c == '\t') {
            if (!cur.empty()) tokens.push_back(to_upper(cur)), cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) tokens.push_back(to_upper(cur));
    // Longest run of adjacent tokens first: "RTX 6000 Ada" before "RTX 6000"; joined plainly
    // ("RTX4090", "RTXA6000", "MI300X") or with dashes ("RTX6000-Ada").
    const Model* found = nullptr;
    for (std::size_t len = 3; len >= 1 && !found; --len) {
        for (std::size_t i = 0; i + len <= tokens.size() && !found; ++i) {
            std::string plain, dashed;
            for (std::size_t k = i; k < i + len; ++k) {
                plain += tokens[k];
                dashed += (k == i ? "" : "-") + tokens[k];
            }
            if (const Model* m = find_model(plain))
                found = m;
            else if (const Model* m2 = find_model(dashed))
                found = m2;
            // "RTX 6000 Ada": the model is "RTX6000-Ada".
            else if (len == 3) {
                const std::string mixed = tokens[i] + tokens[i + 1] + "-" + tokens[i + 2];
                if (const Model* m3 = find_model(mixed)) found = m3;
            }
        }
    }
    if (!found) return std::nullopt;
    Resolved r{found, found->info.name, std::nullopt};
    if (memory_mib > 0 && found->info.memory_gb.size() > 1) {
        const double gib = memory_mib / 1024.0;
        int best = found->info.memory_gb.front();
        for (int v : found->info.memory_gb)
            if (std::fabs(v - gib) < std::fabs(best - gib)) best = v;
        r.memory_gb = best;
    }
    return build(r, std::max(1, count));
}

}  // namespace detail
}  // namespace sky::inline v0
