#include "sky/detail/registry.hpp"

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sky/compute.hpp"

namespace sky::detail {

namespace {
struct Registry {
    std::mutex m;
    std::unordered_multimap<std::string_view, FunctionEntry> by_name;
};
// Function-local static: usable from other translation units' static initialisers.
Registry& registry() {
    static Registry r;
    return r;
}
}  // namespace

bool register_function(const FunctionEntry& e) noexcept {
    try {
        auto& r = registry();
        std::lock_guard lk(r.m);
        auto [b, end] = r.by_name.equal_range(e.name);
        for (auto it = b; it != end; ++it)
            if (it->second.signature == e.signature) return true;
        r.by_name.emplace(e.name, e);
        return true;
    } catch (...) {
        return false;
    }
}

Lookup find_function(std::string_view name, std::uint64_t signature) noexcept {
    auto& r = registry();
    std::lock_guard lk(r.m);
    Lookup l;
    auto [b, end] = r.by_name.equal_range(name);
    for (auto it = b; it != end; ++it) {
        l.name_known = true;
        if (it->second.signature == signature) {
            l.entry = &it->second;
            return l;
        }
    }
    return l;
}

std::vector<FunctionEntry> all_functions() {
    auto& r = registry();
    std::vector<FunctionEntry> v;
    {
        std::lock_guard lk(r.m);
        for (auto& [k, e] : r.by_name) v.push_back(e);
    }
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) {
        return a.name != b.name ? a.name < b.name : a.signature < b.signature;
    });
    return v;
}

}  // namespace sky::detail

namespace sky::inline v0 {
std::vector<FunctionInfo> registered_functions() {
    std::vector<FunctionInfo> out;
    for (auto& e : detail::all_functions())
        out.push_back({std::string(e.name), std::string(e.signature_text), e.signature});
    return out;
}
}  // namespace sky::inline v0
