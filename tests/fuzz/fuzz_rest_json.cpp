// JSON answers of the REST clouds (DigitalOcean, Verda, Vast.ai, RunPod) through what they share:
// the body parsed as JsonApi::call parses it, then rest::text_of and rest::number_of over every
// member of every object in it (a number member is finite). Each cloud's own mapping of its
// answers is file-local in src/providers/<cloud>/<cloud>.cpp and is not reached from here.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "providers/rest/json_api.hpp"

using nlohmann::json;

namespace {

void walk(const json& j, int depth, int& budget) {
    if (depth > 64 || --budget < 0) return;
    if (j.is_object()) {
        for (const auto& [key, value] : j.items()) {
            (void)sky::detail::rest::text_of(j, key.c_str());
            if (auto n = sky::detail::rest::number_of(j, key.c_str()))
                sky::fuzz::check(std::isfinite(*n), "number_of gave a number that is not finite");
            walk(value, depth + 1, budget);
        }
    } else if (j.is_array()) {
        for (const auto& v : j) walk(v, depth + 1, budget);
    }
    (void)sky::detail::rest::text_of(j, "id");
    (void)sky::detail::rest::number_of(j, "price");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body = sky::fuzz::text(data, size);
    // JsonApi::call turns nlohmann's parse errors into a sky::Error naming the call.
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    int budget = 4096;
    walk(j, 0, budget);
    return 0;
}
