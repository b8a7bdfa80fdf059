#include "runtime/node_marks.hpp"

namespace sky::detail::node {

namespace {
constexpr Mark all[] = {marks::phase,     marks::port,          marks::exit,
                        marks::idle,      marks::superseded,    marks::probe,
                        marks::placed,    marks::volume_failed, marks::volumes_mounted,
                        marks::no_dpkg,   marks::missing,       marks::python_missing,
                        marks::no_python, marks::python,        marks::incoming,
                        marks::refused};
}  // namespace

std::string Mark::line(std::string_view value) const {
    std::string l(text);
    if (!value.empty()) {
        l += ' ';
        l += value;
    }
    return l;
}

std::optional<std::string_view> Mark::value_in(std::string_view l) const {
    if (l.size() <= text.size() || l.substr(0, text.size()) != text || l[text.size()] != ' ')
        return std::nullopt;
    return l.substr(text.size() + 1);
}

bool is_mark(std::string_view l) {
    for (const auto& m : all)
        if (m.is(l) || m.value_in(l)) return true;
    return false;
}

PhaseReader::PhaseReader(std::function<void(const std::string&)> on_phase, std::string first_phase,
                         std::size_t keep)
    : on_phase_(std::move(on_phase)), keep_(keep), phase_(std::move(first_phase)) {}

void PhaseReader::line(std::string_view l) {
    if (const auto p = marks::phase.value_in(l)) {
        std::string now(*p);
        {
            std::lock_guard lk(m_);
            phase_ = now;
        }
        if (on_phase_) on_phase_(now);
        return;
    }
    std::lock_guard lk(m_);
    tail_.emplace_back(l);
    if (tail_.size() > keep_) tail_.pop_front();
}

void PhaseReader::text(std::string_view text) {
    while (!text.empty()) {
        const auto nl = text.find('\n');
        line(text.substr(0, nl));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

std::string PhaseReader::phase() const {
    std::lock_guard lk(m_);
    return phase_;
}

std::vector<std::string> PhaseReader::tail() const {
    std::lock_guard lk(m_);
    return {tail_.begin(), tail_.end()};
}

}  // namespace sky::detail::node
