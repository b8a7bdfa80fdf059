// sky::map (api.md §2a): cutting a map into chunk calls, and the errors of its elements. The
// chunk runner itself is header code (sky/map.hpp), instantiated for each F.
#include "sky/map.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <typeinfo>

#include "util/text.hpp"

namespace sky::detail {

namespace {
// How many chunks each slot gets by default: enough that a slow chunk or a lost node leaves
// the others work to share, few enough that per-call costs stay small against the elements.
constexpr std::size_t chunks_per_slot = 4;

}  // namespace

ElementError describe_current_exception(std::uint64_t index) {
    auto d = current_exception_description();
    return {index, std::move(d.type_name), std::move(d.message)};
}

MapRun plan_map(const CallDesc& base, std::string_view function, const MapData& data,
                std::size_t chunk, std::size_t slots) {
    MapRun run;
    run.function = std::string(function);
    const std::size_t n = data.count;
    if (chunk == 0) {
        const std::size_t want = std::max<std::size_t>(1, slots) * chunks_per_slot;
        chunk = std::max<std::size_t>(1, (n + want - 1) / want);
    }
    const std::size_t chunks = (n + chunk - 1) / chunk;
    run.calls.reserve(chunks);
    run.starts.reserve(chunks + 1);
    for (std::size_t first = 0; first < n; first += chunk) {
        const std::size_t last = std::min(n, first + chunk);
        const std::size_t from = data.offset(first), to = data.offset(last);
        // The bytes cereal writes for a std::vector of these elements: a 64-bit count, then
        // the elements; then the fixed arguments.
        auto args = std::make_shared<Buffer>(8 + (to - from) + data.fixed.size());
        const std::uint64_t count = last - first;
        args->append(&count, sizeof count);
        args->append(data.elements.data() + from, to - from);
        args->append(data.fixed.data(), data.fixed.size());
        CallDesc c = base;
        c.args = std::move(args);
        run.calls.push_back(std::move(c));
        run.starts.push_back(first);
    }
    run.starts.push_back(n);
    return run;
}

std::exception_ptr element_error(const MapRun& run, const Outcome& o, std::size_t index,
                                 ElementError e) {
    return std::make_exception_ptr(
        RemoteError(run.function, o.node, o.instance_id, std::move(e.type_name),
                    fmt::format("element {}: {}", index, e.message), o.log_tail));
}

}  // namespace sky::detail
