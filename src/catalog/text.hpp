#pragma once
// Text helpers of the catalog component: "did you mean" suggestions and lists for messages (the
// generic ones, trim and case, are in util/text.hpp).
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "util/text.hpp"

namespace sky::detail {

/// Levenshtein distance, case-insensitive.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                              std::tolower(static_cast<unsigned char>(b[j - 1]));
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

/// The candidates nearest to `word` by edit distance (at most `limit`, only reasonably close ones).
inline std::vector<std::string> nearest(std::string_view word, const std::vector<std::string>& all,
                                        std::size_t limit = 3) {
    std::vector<std::pair<std::size_t, std::string>> scored;
    for (const auto& c : all) scored.emplace_back(edit_distance(word, c), c);
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::string> out;
    const std::size_t cutoff = std::max<std::size_t>(2, word.size() / 2 + 1);
    for (const auto& [d, c] : scored) {
        if (out.size() >= limit || d > cutoff) break;
        out.push_back(c);
    }
    return out;
}

/// "a, b or c" for messages.
inline std::string join_or(const std::vector<std::string>& items) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += (i + 1 == items.size()) ? " or " : ", ";
        out += items[i];
    }
    return out;
}

}  // namespace sky::detail
