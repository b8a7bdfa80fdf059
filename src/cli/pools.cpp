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
                // What is missing, in the provider's words (never a secret: it names sources).
                if (not_asked)
                    not_asked->push_back(
                        c.source.empty()
                            ? fmt::format("{} (no credentials)", d.name)
                            : fmt::format("{} (no credentials: {})", d.name, c.source));
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

namespace {

// `text` in pieces of at most `width` characters, broken after a space, '/' or ',' where one
// is near (a path or URL breaks between its parts).
std::vector<std::string> wrap(const std::string& text, std::size_t width) {
    if (width == 0 || text.size() <= width) return {text};
    std::vector<std::string> out;
    std::size_t from = 0;
    while (text.size() - from > width) {
        std::size_t cut = text.find_last_of(" /,", from + width - 1);
        if (cut == std::string::npos || cut < from + width / 2)
            cut = from + width;  // no break near: a hard one
        else
            ++cut;  // the breaking character stays on this line
        std::string piece = text.substr(from, cut - from);
        while (!piece.empty() && piece.back() == ' ') piece.pop_back();
        out.push_back(std::move(piece));
        from = cut;
        while (from < text.size() && text[from] == ' ') ++from;
    }
    if (from < text.size()) out.push_back(text.substr(from));
    return out;
}

}  // namespace

void print_table(const std::vector<std::vector<std::string>>& rows, std::size_t max_cell) {
    std::vector<std::size_t> width;
    // Each row as the lines it takes: a wrapped cell continues below itself, the others blank.
    std::vector<std::vector<std::string>> lines;
    for (const auto& r : rows) {
        std::vector<std::vector<std::string>> cells;
        std::size_t height = 1;
        for (const auto& c : r) {
            cells.push_back(wrap(detail::terminal_safe(c), max_cell));
            height = std::max(height, cells.back().size());
        }
        for (std::size_t k = 0; k < height; ++k) {
            std::vector<std::string> line;
            for (const auto& c : cells) line.push_back(k < c.size() ? c[k] : "");
            for (std::size_t i = 0; i < line.size(); ++i) {
                if (width.size() <= i) width.push_back(0);
                width[i] = std::max(width[i], line[i].size());
            }
            lines.push_back(std::move(line));
        }
    }
    for (const auto& r : lines) {
        std::string line;
        for (std::size_t i = 0; i < r.size(); ++i)
            line += fmt::format("{:<{}}", r[i], i + 1 < r.size() ? width[i] + 2 : 0);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::printf("%s\n", line.c_str());
    }
}

}  // namespace sky::cli
