#pragma once
// What a pool shows a person (PoolSpec::display): `log` lines, a live `spinner` block redrawn in
// place on a terminal (plain state-change lines otherwise), or nothing; and a summary table
// when the pool ends.
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sky/events.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// `text` made safe to print on a terminal: C0 controls other than tab (ESC, CR, BEL, BS, ...),
/// DEL and C1 controls (U+0080..U+009F) become `\xNN` (or `\u{NN}`), so remote output cannot
/// move the cursor, rewrite lines above, set the title or the clipboard (OSC 52), or hide text.
/// Other UTF-8 passes unchanged; a byte that is not valid UTF-8 becomes `\xNN` too.
[[nodiscard]] std::string terminal_safe(std::string_view text);

class DisplayRenderer {
public:
    /// `out` is where lines go (stderr for a pool); `terminal` says whether to redraw in place.
    DisplayRenderer(Display mode, std::FILE* out, bool terminal);
    /// Shows an event (or updates the live block).
    void show(const Event& e);
    /// Redraws the live block with the calls running on each node (spinner on a terminal).
    void tick(const std::vector<int>& running);
    /// Clears the live block (the pool is gone).
    void close();

private:
    struct Node {
        std::string instance_id;
        std::string instance_type;
        std::string phase = "provisioning";
        int running = 0;
    };
    void print(const std::string& text);  // above the live block
    void redraw();
    void clear_block();
    void phase(int node, const std::string& id, const std::string& what);
    void summary(const CostFinal& c);

    Display mode_;
    std::FILE* out_;
    bool terminal_;
    std::map<int, Node> nodes_;
    std::string pool_id_;
    double cost_ = 0, rate_ = 0;
    int frame_ = 0;
    int drawn_lines_ = 0;
    bool closed_ = false;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace sky::detail
