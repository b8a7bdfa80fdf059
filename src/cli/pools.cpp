#include "cli/pools.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "pool/display.hpp"
#include "sky/errors.hpp"
#include "util/text.hpp"

namespace sky::cli {

using detail::LedgerRecord;
using detail::ProviderDescriptor;

std::vector<const ProviderDescriptor*> listing_providers(const std::optional<std::string>& only,
                                                         std::vector<std::string>* not_asked) {
    std::vector<const ProviderDescriptor*> out;
    for (const auto& d : detail::providers()) {
        if (only && d.name != *only) continue;
        if (!d.list_machines) continue;  // Local, SSH: no machines of their own to list
        if (d.credentials) {
            const detail::CredentialStatus c = d.credentials();
            if (!c.present) {
                if (not_asked) not_asked->push_back(fmt::format("{} (no credentials)", d.name));
                continue;
            }
        }
        out.push_back(&d);
    }
    return out;
}

TaggedMachines list_tagged(const ProviderDescriptor& d, const detail::MachineQuery& query) {
    TaggedMachines t;
    t.provider = std::string(d.name);
    try {
        detail::Machines m = d.list_machines(query);
        t.region = std::move(m.region);
        t.machines = std::move(m.machines);
    } catch (const ConfigError& e) {
        t.error = detail::terminal_safe(e.what());
        t.unconfigured = true;
    } catch (const std::exception& e) {
        // Adapters never put a credential in an error; quoted answers may hold escapes.
        t.error = detail::terminal_safe(e.what());
    }
    return t;
}

std::string pool_state(const LedgerRecord& r) {
    const auto live = r.live_instances().size();
    switch (r.owner()) {
        case LedgerRecord::Owner::other_host:
            return fmt::format("on host {}", r.host);
        case LedgerRecord::Owner::unknown:
            if (!r.closed) return "cannot tell";
            break;
        case LedgerRecord::Owner::alive:
            if (!r.closed) return "running";
            break;
        case LedgerRecord::Owner::dead:
            if (!r.closed) return "owner gone";
            break;
    }
    if (live) return fmt::format("closed, {} left", live);
    return r.infra_left.empty() ? std::string("closed") : std::string("closed, infra left");
}

std::string utc(std::int64_t unix_seconds) {
    if (unix_seconds <= 0) return "-";
    const std::time_t t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string join(const std::vector<std::string>& items, std::size_t max) {
    return items.empty() ? "-" : detail::join(items, ", ", max);
}

std::string_view state_name(CloudInstance::State s) {
    switch (s) {
        case CloudInstance::State::pending:
            return "pending";
        case CloudInstance::State::running:
            return "running";
        case CloudInstance::State::stopping:
            return "stopping";
        case CloudInstance::State::gone:
            return "gone";
        case CloudInstance::State::unknown:
            return "unknown";
    }
    return "?";
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> width;
    std::vector<std::vector<std::string>> safe;
    for (const auto& r : rows) {
        std::vector<std::string> s;
        for (const auto& c : r) s.push_back(detail::terminal_safe(c));
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (width.size() <= i) width.push_back(0);
            width[i] = std::max(width[i], s[i].size());
        }
        safe.push_back(std::move(s));
    }
    for (const auto& r : safe) {
        std::string line;
        for (std::size_t i = 0; i < r.size(); ++i)
            line += fmt::format("{:<{}}", r[i], i + 1 < r.size() ? width[i] + 2 : 0);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::printf("%s\n", line.c_str());
    }
}

}  // namespace sky::cli
