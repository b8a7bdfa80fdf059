#pragma once
/// \file The offer catalog and instance selection (docs/api.md §7).
///
/// An `Offer` is one instance type of one provider in one region with its prices. The library
/// embeds a catalog of offers (data/catalog/<provider>.csv, compiled in), which live prices from a
/// provider's API may override with `Catalog::merge`.
///
/// Selection rule (`matching_offers`): an offer matches when it meets every minimum of the request:
///   - `machine`, when set, overrides the shape: only that instance type matches (the region and
///     the spot strategy's need for a spot market still apply);
///   - `accelerator`: same model family, compared by canonical name, so "L4" never matches an L40
///     or L40S, and "A100" matches every A100 memory variant while "A100-80GB" (memory = 80GB)
///     matches only A100s with at least 80 GB; `count` and `memory` are minimums per node and per
///     device (AWS has no 1x A100 machine, so "A100" there is p4d.24xlarge, its smallest);
///     with no accelerator, only CPU offers (no accelerator) match;
///   - `cpu` and `memory` are minimums per node; `region` must be equal (case-insensitive); an
///     offer with an empty region (the provider places it) matches only when no region is asked;
///   - a strategy that needs spot (Always, Percent > 0) excludes offers with no spot market.
/// Matches are ordered cheapest first, by spot price when the strategy wants spot (the on-demand
/// price stands in when the spot price is unknown: spot never costs more), else by on-demand
/// price; ties go to the closer accelerator count, then fewer vCPUs, then names.
///
/// Memory units: "GB" and "GiB" both mean 2^30 bytes (see sky::parse_memory_gb); instance memory
/// is in GiB as providers report it; accelerator memory is the marketed per-device size.
#include <optional>
#include <sky/accelerator.hpp>
#include <sky/spot.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// One instance type of one provider in one region, with its prices.
struct Offer {
    std::string provider;              ///< "aws", "runpod", "vastai", "verda", "digitalocean", ...
    std::string instance_type;         ///< the provider's name, e.g. "p5.48xlarge"
    std::string accelerator;           ///< canonical accelerator name ("H100"); empty for CPU only
    int accelerator_count = 0;         ///< accelerators per instance
    double gpu_memory_gb = 0;          ///< memory per accelerator, marketed GB
    int vcpus = 0;                     ///< vCPUs per instance
    double memory_gb = 0;              ///< instance memory, GiB
    std::string region;                ///< e.g. "us-east-1"; empty when the provider places it
    double on_demand_price = 0;        ///< USD per hour
    std::optional<double> spot_price;  ///< USD per hour; none when unknown or no spot market
    bool spot_available = true;  ///< whether the provider sells it as spot/interruptible at all
    std::string prices_date;     ///< ISO date on which the prices were known true

    /// The hourly price for spot or on-demand capacity (on-demand stands in for an unknown spot).
    [[nodiscard]] double hourly_price(bool spot) const {
        return spot && spot_price ? *spot_price : on_demand_price;
    }

    friend bool operator==(const Offer&, const Offer&) = default;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(provider, instance_type, accelerator, accelerator_count, gpu_memory_gb, vcpus, memory_gb,
           region, on_demand_price, spot_price, spot_available, prices_date);
    }
};

/// What a pool asks of an instance; every field is optional, each is a minimum.
struct SelectionRequest {
    std::optional<Accelerator> accelerator;  ///< model, count and per-device memory wanted
    std::optional<int> cpu;                  ///< minimum vCPUs
    std::optional<std::string> memory;       ///< minimum instance memory, e.g. "128GB"
    std::optional<std::string> region;       ///< exact region
    Spot spot = Spot::Never{};               ///< ranks by spot price unless Never
    std::optional<std::string> machine;      ///< exact instance type; overrides the shape
};

/// The cheapest offer that meets every minimum of `request`; none when nothing matches.
[[nodiscard]] std::optional<Offer> select_instance(const std::vector<Offer>& offers,
                                                   const SelectionRequest& request);
/// Every offer that meets `request`, cheapest first (what the pool tries, in order).
[[nodiscard]] std::vector<Offer> matching_offers(const std::vector<Offer>& offers,
                                                 const SelectionRequest& request);
/// Whether one offer meets `request`; when it does not and `why` is given, says which minimum.
[[nodiscard]] bool offer_matches(const Offer& offer, const SelectionRequest& request,
                                 std::string* why = nullptr);
/// Why nothing matches: the requirement that ruled out the last candidates, with the nearest
/// offers and their values (for sky::ProvisionError). Empty when some offer matches.
[[nodiscard]] std::string explain_no_match(const std::vector<Offer>& offers,
                                           const SelectionRequest& request);

/// A set of offers indexed by provider; the embedded one is loaded once and immutable.
class Catalog {
public:
    /// An empty catalog (to fill with merge()).
    Catalog() = default;
    /// A catalog of these offers.
    explicit Catalog(std::vector<Offer> offers);

    /// The catalog compiled into libsky (parsed on first use, thread-safe).
    [[nodiscard]] static const Catalog& embedded();
    /// Parses one provider's CSV text (format in data/catalog/README.md); throws sky::ConfigError
    /// naming the line for a malformed row.
    [[nodiscard]] static std::vector<Offer> parse_csv(std::string_view provider,
                                                      std::string_view text);

    /// Every offer, in load order.
    [[nodiscard]] const std::vector<Offer>& offers() const noexcept { return offers_; }
    /// The offers of one provider (case-insensitive name); empty when unknown.
    [[nodiscard]] std::vector<Offer> offers(std::string_view provider) const;
    /// Provider names present, sorted.
    [[nodiscard]] std::vector<std::string> providers() const;
    /// Matching offers of one provider (all providers when empty), cheapest first.
    [[nodiscard]] std::vector<Offer> select(const SelectionRequest& request,
                                            std::string_view provider = {}) const;
    /// Live offers replace those with the same (provider, instance type, region); new ones are
    /// added. Use on a copy of `embedded()`.
    void merge(std::vector<Offer> live);

private:
    void reindex();
    std::vector<Offer> offers_;
    std::unordered_map<std::string, std::vector<std::size_t>> by_provider_;
};

SKY_PUBLIC_END
