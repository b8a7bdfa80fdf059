// Accelerator, memory and spot strings as users and workers write them: Accelerator::parse
// (and parse(to_string()) == the accelerator, as accelerator.hpp promises), the catalog look-ups
// the parse result feeds, parse_memory_gb (a finite size that is not negative), Spot::parse
// (to_string() parses back to the same strategy). Bad strings are a ConfigError (sky::Error).
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "sky/accelerator.hpp"
#include "sky/spot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view s = sky::fuzz::text(data, size);
    sky::fuzz::expect_typed([&] {
        const sky::Accelerator a = sky::Accelerator::parse(s);
        const std::string shown = a.to_string();
        sky::Accelerator back;
        sky::fuzz::expect_typed([&] { back = sky::Accelerator::parse(shown); });
        sky::fuzz::check(back == a, "Accelerator::parse(to_string()) differs for '" +
                                        std::string(s) + "' shown as '" + shown + "'");
        (void)sky::accelerator_info(a.name);
        (void)sky::workers_per_device(a);
        (void)sky::mig_profiles(a.name);
    });
    (void)sky::is_nvidia(s);
    (void)sky::is_trainium(s);
    sky::fuzz::expect_typed([&] {
        const double gb = sky::parse_memory_gb(s);
        sky::fuzz::check(std::isfinite(gb) && gb >= 0,
                         "parse_memory_gb('" + std::string(s) + "') = " + std::to_string(gb));
    });
    sky::fuzz::expect_typed([&] {
        const sky::Spot spot = sky::Spot::parse(s);
        const std::string shown = spot.to_string();
        const sky::Spot back = sky::Spot::parse(shown);
        sky::fuzz::check(back.strategy.index() == spot.strategy.index(),
                         "Spot::parse(to_string()) is another strategy for '" + std::string(s) +
                             "' shown as '" + shown + "'");
    });
    return 0;
}
