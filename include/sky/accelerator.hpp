#pragma once
/// \file Accelerators (docs/api.md §7): what hardware a pool asks for.
///
/// Names are canonical and case-insensitive on input: "h100" parses as "H100". Variant spellings
/// from the seeds map onto a canonical name plus a per-device memory: "A100-80GB" is
/// `{name = "A100", memory = "80GB"}`, "H100-SXM" and "H100-PCIe" are "H100" (the form factor is
/// not modelled), "H100-NVL" is `{name = "H100", memory = "94GB"}`.
///
/// `memory` is a minimum per device. It is filled in from the catalog when the model comes in one
/// memory size only (or has a documented default, as H100 = 80 GB); for models sold in several
/// sizes (A100 40/80 GB, V100 16/32 GB) it stays empty, meaning "any size", unless asked for or
/// implied by a MIG profile.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// A request for accelerators: a name ("H100"), a count, optionally memory and a MIG profile.
struct Accelerator {
    std::string name;                     ///< canonical name, e.g. "H100", "A100", "Trainium2"
    std::optional<std::string> memory;    ///< per-device memory, e.g. "80GB"
    int count = 1;                        ///< devices per node
    std::optional<std::string> mig;       ///< MIG profile, e.g. "3g.40gb"
    std::string manufacturer;             ///< "NVIDIA", "AWS", "Google", "AMD"
    std::string architecture;             ///< e.g. "Hopper", "Ampere", "CDNA3"; empty when unknown
    std::optional<std::string> cuda_min;  ///< oldest CUDA toolkit that supports it (NVIDIA only)
    std::optional<std::string> cuda_max;  ///< newest CUDA toolkit that supports it; none = current

    /// No accelerator named yet (a CPU node when used as such).
    Accelerator() = default;
    /// Implicit from "A100", "H100:8", "A100-40GB:2" (as in PoolSpec::accelerator).
    Accelerator(const char* spec) : Accelerator(parse(spec)) {}
    /// Implicit from a std::string spec, as from a const char*.
    Accelerator(const std::string& spec) : Accelerator(parse(spec)) {}

    /// Parses "NAME[-MEMORY][@MIG][:COUNT]" ("H100:8", "A100-40GB:2", "H100@3g.40gb"); throws
    /// sky::ConfigError for an unknown name (suggesting the nearest), size, profile or count.
    static Accelerator parse(std::string_view spec);
    /// "H100:8" style; memory and MIG appear only when the name alone would not imply them, so
    /// that parse(to_string()) == *this.
    [[nodiscard]] std::string to_string() const;

    friend bool operator==(const Accelerator&, const Accelerator&) = default;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(name, memory, count, mig, manufacturer, architecture, cuda_min, cuda_max);
    }
};

/// One MIG partition profile of a GPU model, as in the seeds' tables.
struct MigProfile {
    std::string name;   ///< e.g. "3g.40gb"
    int workers = 1;    ///< workers the pool runs per physical GPU with this profile
    int memory_gb = 0;  ///< memory of each partition
};

/// Catalog facts about one accelerator model, so that callers need not hard-code them.
struct AcceleratorInfo {
    std::string name;                      ///< canonical name
    std::string manufacturer;              ///< "NVIDIA", "AWS", "Google", "AMD"
    std::string architecture;              ///< "Hopper", "Ampere", "Trainium2", ...
    std::vector<int> memory_gb;            ///< sizes it is sold in, per device, smallest first
    std::optional<int> default_memory_gb;  ///< filled into Accelerator::memory when present
    std::optional<std::string> cuda_min;   ///< NVIDIA only
    std::optional<std::string> cuda_max;   ///< NVIDIA only; none = supported by current CUDA
};

/// The facts for a canonical or alias name (case-insensitive); throws sky::ConfigError if unknown.
[[nodiscard]] const AcceleratorInfo& accelerator_info(std::string_view name);
/// Every known canonical accelerator name, in catalog order (for help texts and suggestions).
[[nodiscard]] std::vector<std::string> known_accelerators();

/// The MIG profiles of `gpu` with `memory_gb` per device (0 = the model's default or largest);
/// empty when the model has no MIG.
[[nodiscard]] std::vector<MigProfile> mig_profiles(std::string_view gpu, int memory_gb = 0);
/// Workers to run per physical device: the MIG profile's worker count, 1 without MIG.
[[nodiscard]] int workers_per_device(const Accelerator& acc);

/// True for NVIDIA GPU names ("H100", "A100-80GB", "T4"); false for "MI300X", "Trainium2".
[[nodiscard]] bool is_nvidia(std::string_view name);
/// True for AWS Trainium names ("Trainium", "Trainium2").
[[nodiscard]] bool is_trainium(std::string_view name);

/// The accelerator of the node this code runs on, inside a compute function. The worker exports
/// it as `SKY_ACCELERATOR` (in `Accelerator::parse` syntax, e.g. "H100:8"); none when unset (a
/// CPU node, or outside a worker). A malformed value is ignored rather than thrown.
[[nodiscard]] std::optional<Accelerator> current_accelerator();

/// Parses a memory size ("32GB", "32 GiB", "512MB", "1.5TB", or a bare number of GB) into GiB.
/// GB and GiB are both taken as 2^30 bytes, as cloud consoles do. Throws sky::ConfigError naming
/// `option` and the value when it cannot be parsed.
[[nodiscard]] double parse_memory_gb(std::string_view text, std::string_view option = "memory");

namespace accelerators {

/// Options of the NVIDIA and AMD factories: `H100({.count = 4})`, `A100({.memory = "40GB"})`.
struct Options {
    int count = 1;                      ///< devices per node
    std::optional<std::string> memory;  ///< per-device memory variant, e.g. "40GB"
    std::optional<std::string> mig;     ///< MIG profile, e.g. "3g.40gb"
};

/// Options of the AWS chip factories: `Trainium({.version = 2})`.
struct ChipOptions {
    int version = 2;  ///< 1 or 2
    int count = 1;    ///< chips per node
};

/// Options of the Google TPU factory: `TPU({.version = "v5p"})`.
struct TpuOptions {
    std::string version = "v5p";  ///< "v4", "v5e", "v5p", "v6e"
    int count = 1;                ///< chips per node
};

/// Any known accelerator by name with options (what the named factories below call).
[[nodiscard]] Accelerator make(std::string_view name, const Options& options = {});

// NVIDIA
/// NVIDIA H100 (Hopper, 80 GB; 94 GB for NVL), MIG capable.
[[nodiscard]] inline Accelerator H100(const Options& o = {}) { return make("H100", o); }
/// NVIDIA H200 (Hopper, 141 GB).
[[nodiscard]] inline Accelerator H200(const Options& o = {}) { return make("H200", o); }
/// NVIDIA A100 (Ampere, 40 or 80 GB), MIG capable.
[[nodiscard]] inline Accelerator A100(const Options& o = {}) { return make("A100", o); }
/// NVIDIA B100 (Blackwell, 192 GB).
[[nodiscard]] inline Accelerator B100(const Options& o = {}) { return make("B100", o); }
/// NVIDIA B200 (Blackwell, 192 GB).
// <termios.h> defines B200 as a baud rate; keep this declaration valid whatever the include
// order. (After <termios.h>, call it as `(sky::accelerators::B200)()`.)
#pragma push_macro("B200")
#undef B200
[[nodiscard]] inline Accelerator B200(const Options& o = {}) { return make("B200", o); }
#pragma pop_macro("B200")
/// NVIDIA GB200 (Grace Blackwell superchip, 384 GB).
[[nodiscard]] inline Accelerator GB200(const Options& o = {}) { return make("GB200", o); }
/// NVIDIA GH200 (Grace Hopper superchip, 96 GB).
[[nodiscard]] inline Accelerator GH200(const Options& o = {}) { return make("GH200", o); }
/// NVIDIA L4 (Ada Lovelace, 24 GB).
[[nodiscard]] inline Accelerator L4(const Options& o = {}) { return make("L4", o); }
/// NVIDIA L40 (Ada Lovelace, 48 GB).
[[nodiscard]] inline Accelerator L40(const Options& o = {}) { return make("L40", o); }
/// NVIDIA L40S (Ada Lovelace, 48 GB).
[[nodiscard]] inline Accelerator L40S(const Options& o = {}) { return make("L40S", o); }
/// NVIDIA T4 (Turing, 16 GB).
[[nodiscard]] inline Accelerator T4(const Options& o = {}) { return make("T4", o); }
/// NVIDIA A10 (Ampere, 24 GB).
[[nodiscard]] inline Accelerator A10(const Options& o = {}) { return make("A10", o); }
/// NVIDIA A10G (Ampere, 24 GB; the AWS g5 variant of the A10).
[[nodiscard]] inline Accelerator A10G(const Options& o = {}) { return make("A10G", o); }
/// NVIDIA V100 (Volta, 16 or 32 GB).
[[nodiscard]] inline Accelerator V100(const Options& o = {}) { return make("V100", o); }

// AWS
/// AWS Trainium chips: version 1 is "Trainium", version 2 "Trainium2".
[[nodiscard]] Accelerator Trainium(const ChipOptions& o = {});
/// AWS Inferentia chips: version 1 is "Inferentia", version 2 "Inferentia2".
[[nodiscard]] Accelerator Inferentia(const ChipOptions& o = {});

// Google
/// A Google TPU generation, e.g. `TPU({.version = "v5p"})` is "TPU-v5p".
[[nodiscard]] Accelerator TPU(const TpuOptions& o = {});
/// A Google TPU slice by its topology name, e.g. `TPUSlice("v5p-8")` is "TPU-v5p-8", count 1.
[[nodiscard]] Accelerator TPUSlice(std::string_view slice);

// AMD
/// An AMD Instinct GPU by model suffix: `MI("300X")` is "MI300X".
[[nodiscard]] Accelerator MI(std::string_view model, const Options& o = {});

}  // namespace accelerators

SKY_PUBLIC_END
