#include "pool/display.hpp"

#include <fmt/format.h>

namespace sky::detail {

namespace {
constexpr const char* spin[] = {"|", "/", "-", "\\"};

// Length of the well-formed UTF-8 sequence starting at text[i] (0: not one).
std::size_t utf8_length(std::string_view text, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = b(i);
    std::size_t n = 0;
    unsigned min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (i + n > text.size()) return 0;
    unsigned cp = c & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\t' || (c >= 0x20 && c < 0x7F)) {
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        }
        if (c >= 0x80) {
            if (std::size_t n = utf8_length(text, i); n > 0) {
                // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) act like ESC sequences
                // on some terminals.
                const auto next = static_cast<unsigned char>(text[i + 1]);
                if (n == 2 && c == 0xC2 && next <= 0x9F) {
                    out += fmt::format("\\u{{{:02x}}}", next);
                } else {
                    out.append(text.substr(i, n));
                }
                i += n;
                continue;
            }
        }
        out += fmt::format("\\x{:02x}", c);  // C0 controls, DEL, invalid UTF-8
        ++i;
    }
    return out;
}

DisplayRenderer::DisplayRenderer(Display mode, std::FILE* out, bool terminal)
    : mode_(mode), out_(out), terminal_(terminal) {}

void DisplayRenderer::print(const std::string& text) {
    if (mode_ == Display::spinner && terminal_) clear_block();
    std::fwrite(text.data(), 1, text.size(), out_);
    if (mode_ == Display::spinner && terminal_ && !closed_) redraw();
    std::fflush(out_);
}

void DisplayRenderer::clear_block() {
    if (drawn_lines_ == 0) return;
    // Up to the block's first line, then clear everything below.
    std::string s = fmt::format("\x1b[{}F\x1b[J", drawn_lines_);
    std::fwrite(s.data(), 1, s.size(), out_);
    drawn_lines_ = 0;
}

void DisplayRenderer::redraw() {
    if (nodes_.empty()) return;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string s = fmt::format("{} sky pool {} | {} node{} | ${:.4f} (${:.3f}/h) | {:.0f}s\n",
                                spin[frame_ % 4], pool_id_.empty() ? "starting" : pool_id_,
                                nodes_.size(), nodes_.size() == 1 ? "" : "s", cost_, rate_, secs);
    for (auto& [i, n] : nodes_) {
        std::string what = n.phase;
        if (n.phase == "ready" && n.running > 0)
            what = fmt::format("running {} call{}", n.running, n.running == 1 ? "" : "s");
        s += fmt::format("  node {:<3} {:<28} {}\n", i, terminal_safe(n.instance_id),
                         terminal_safe(what));
    }
    std::fwrite(s.data(), 1, s.size(), out_);
    drawn_lines_ = static_cast<int>(nodes_.size()) + 1;
}

void DisplayRenderer::tick(const std::vector<int>& running) {
    if (mode_ != Display::spinner || !terminal_ || closed_) return;
    for (std::size_t i = 0; i < running.size(); ++i) {
        auto it = nodes_.find(static_cast<int>(i));
        if (it != nodes_.end()) it->second.running = running[i];
    }
    ++frame_;
    clear_block();
    redraw();
    std::fflush(out_);
}

void DisplayRenderer::close() {
    if (closed_) return;
    if (mode_ == Display::spinner && terminal_) {
        clear_block();
        std::fflush(out_);
    }
    closed_ = true;
}

void DisplayRenderer::phase(int node, const std::string& id, const std::string& what) {
    auto& n = nodes_[node];
    if (!id.empty()) n.instance_id = id;
    if (n.phase == what) return;
    n.phase = what;
    if (mode_ == Display::spinner && !terminal_)
        print(fmt::format("sky: node {} ({}): {}\n", node, terminal_safe(n.instance_id),
                          terminal_safe(what)));
    else if (mode_ == Display::spinner)
        print("");
}

void DisplayRenderer::summary(const CostFinal& c) {
    if (nodes_.empty()) return;  // nothing started
    std::map<std::string, int> types;
    for (auto& [i, n] : nodes_) ++types[n.instance_type.empty() ? "-" : n.instance_type];
    std::string t;
    for (auto& [k, v] : types) t += fmt::format("{}{} x {}", t.empty() ? "" : ", ", v, k);
    std::string s = fmt::format(
        "sky: pool {} summary\n"
        "  {:<6} {:<30} {:>10} {:>11} {:>10} {:>11}\n"
        "  {:<6} {:<30} {:>9.2f}s {:>11} {:>10} {:>11}\n",
        pool_id_, "nodes", "instance types", "time", "cost", "$/hour", "saved", nodes_.size(), t,
        c.total_seconds, fmt::format("${:.4f}", c.total_cost),
        fmt::format("${:.3f}", c.hourly_rate), fmt::format("${:.4f}", c.savings_vs_ondemand));
    print(s);
}

void DisplayRenderer::show(const Event& e) {
    if (mode_ == Display::quiet) return;
    // State the live block needs, whatever the mode.
    if (auto* p = std::get_if<InstanceProvisioned>(&e)) {
        nodes_[p->node].instance_type = p->instance_type.value_or(p->provider);
        if (mode_ == Display::spinner) phase(p->node, p->instance_id, "provisioned");
    } else if (auto* ps = std::get_if<PoolStarted>(&e)) {
        pool_id_ = ps->pool_id;
        if (mode_ == Display::spinner)
            for (auto& [i, n] : nodes_) phase(i, "", "ready");
    } else if (auto* b = std::get_if<BootstrapProgress>(&e)) {
        for (auto& [i, n] : nodes_)
            if (n.instance_id == b->instance_id && mode_ == Display::spinner)
                phase(i, "", "bootstrap: " + b->step);
    } else if (auto* r = std::get_if<InstanceReplaced>(&e)) {
        if (mode_ == Display::spinner) phase(r->node, r->new_instance_id, "ready");
    } else if (auto* s = std::get_if<InstanceStopping>(&e)) {
        for (auto& [i, n] : nodes_)
            if (n.instance_id == s->instance_id && mode_ == Display::spinner)
                phase(i, "", "stopping");
    } else if (auto* c = std::get_if<CostUpdate>(&e)) {
        cost_ = c->accumulated_cost;
        rate_ = c->hourly_rate;
    }

    if (auto* l = std::get_if<LogLine>(&e)) {
        // A worker's line is whatever its program printed (or a hostile node sent).
        print(fmt::format("[node {}] {}\n", l->node, terminal_safe(l->line)));
        return;
    }
    if (auto* c = std::get_if<CostFinal>(&e)) {
        close();
        summary(*c);
        return;
    }
    if (mode_ == Display::log) {
        // Event texts quote remote errors, instance ids and provider messages.
        print(fmt::format("sky: {}\n", terminal_safe(describe(e))));
        return;
    }
    // Spinner: errors and pool-level events as lines; node states live in the block.
    if (std::holds_alternative<ErrorEvent>(e) || std::holds_alternative<PoolStarted>(e) ||
        std::holds_alternative<PoolStopping>(e) || std::holds_alternative<InstancePreempted>(e) ||
        std::holds_alternative<PreemptionNotice>(e) || std::holds_alternative<PoolScaled>(e) ||
        std::holds_alternative<NodeDraining>(e) || std::holds_alternative<BudgetWarning>(e))
        print(fmt::format("sky: {}\n", terminal_safe(describe(e))));
}

}  // namespace sky::detail
