#include "pool/node_life.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sky::detail {

namespace {
template <class... F>
struct Overload : F... {
    using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;
}  // namespace

const char* NodeLife::name() const noexcept {
    return std::visit(Overload{[](const life::Starting&) { return "starting"; },
                               [](const life::Ready&) { return "ready"; },
                               [](const life::Reconnecting&) { return "reconnecting"; },
                               [](const life::Resyncing&) { return "resyncing"; },
                               [](const life::Replacing&) { return "replacing"; },
                               [](const life::Lost&) { return "lost"; },
                               [](const life::Draining&) { return "draining"; }},
                      state_);
}

const ReconnectWindow* NodeLife::window() const noexcept {
    if (auto* r = std::get_if<life::Reconnecting>(&state_)) return &r->window;
    if (auto* r = std::get_if<life::Resyncing>(&state_)) return &r->window;
    return nullptr;
}

std::string NodeLife::ended_reason() const {
    if (auto* r = std::get_if<life::Ready>(&state_); r && r->silence) return r->silence->reason;
    if (auto* l = std::get_if<life::Lost>(&state_)) return l->why;
    return {};
}

void NodeLife::ended_while_starting(std::string why, bool protocol_error) {
    if (auto* s = std::get_if<life::Starting>(&state_))
        s->ended_early.emplace(life::Starting::Ended{std::move(why), protocol_error});
}

std::optional<life::Starting::Ended> NodeLife::started() {
    auto* s = std::get_if<life::Starting>(&state_);
    if (!s) return std::nullopt;
    auto early = std::move(s->ended_early);
    state_ = life::Ready{};
    return early;
}

bool NodeLife::silent(std::string reason, LifeClock::time_point since) {
    auto* r = std::get_if<life::Ready>(&state_);
    if (!r || r->silence) return false;
    r->silence = Silence{std::move(reason), since};
    return true;
}

bool NodeLife::dropped(const std::string& why, LifeClock::time_point now, WindowRule rule) {
    if (auto* r = std::get_if<life::Resyncing>(&state_)) {
        // Dropped again before its worker caught up: the same window.
        state_ = life::Reconnecting{std::move(r->window)};
        return true;
    }
    if (is<life::Reconnecting>()) return true;
    // The window opens at the last sign of life: the drop, or the heartbeat that went
    // unanswered.
    const Silence* silence = nullptr;
    if (auto* r = std::get_if<life::Ready>(&state_); r && r->silence) silence = &*r->silence;
    ReconnectWindow w;
    w.deadline = silence ? silence->since + rule.after_silence : now + rule.after_drop;
    w.dropped_at = now;
    w.drop_reason = silence ? silence->reason : why;
    w.drop_silent = silence != nullptr;
    if (now >= w.deadline) return false;
    state_ = life::Reconnecting{std::move(w)};
    return true;
}

ReconnectWindow* NodeLife::open_window() noexcept {
    if (auto* r = std::get_if<life::Reconnecting>(&state_)) return &r->window;
    if (auto* r = std::get_if<life::Resyncing>(&state_)) return &r->window;
    return nullptr;
}

const ReconnectWindow* NodeLife::attempt() {
    auto* w = open_window();
    if (w) ++w->attempts;
    return w;
}

const ReconnectWindow* NodeLife::attempt_failed(std::string why) {
    auto* w = open_window();
    if (w) w->resume_error = std::move(why);
    return w;
}

bool NodeLife::resumed() {
    if (auto* r = std::get_if<life::Reconnecting>(&state_)) {
        state_ = life::Resyncing{std::move(r->window)};
        return true;
    }
    if (auto* r = std::get_if<life::Resyncing>(&state_)) {
        r->resumed_answers = r->resumed_again = 0;
        return true;
    }
    return false;
}

void NodeLife::resumed_answer(bool awaited) {
    if (auto* r = std::get_if<life::Resyncing>(&state_))
        ++(awaited ? r->resumed_answers : r->resumed_again);
}

std::optional<Resynced> NodeLife::caught_up(LifeClock::time_point now) {
    auto* r = std::get_if<life::Resyncing>(&state_);
    if (!r) return std::nullopt;
    Resynced done{r->resumed_answers, r->resumed_again, now - r->window.dropped_at};
    state_ = life::Ready{};
    return done;
}

std::string NodeLife::give_up(const std::string& why, bool worker_gone, LifeClock::time_point now) {
    const ReconnectWindow* w = window();
    std::string reason;
    if (w) {
        // A worker that is gone ended the connection: the backend's word on why, or the
        // silence that came first, says it best.
        if (worker_gone)
            reason = w->drop_silent ? w->drop_reason : std::string();
        else
            reason = fmt::format(
                "its connection dropped ({}) and could not be resumed within {:.0f} s ({} "
                "attempt(s)): {}",
                w->drop_reason, std::chrono::duration<double>(now - w->dropped_at).count(),
                w->attempts, why);
    }
    state_ = life::Lost{reason};
    return reason;
}

void NodeLife::lose() {
    if (!is<life::Lost>()) state_ = life::Lost{};
}

void NodeLife::replace() { state_ = life::Replacing{}; }

void NodeLife::replaced() {
    if (is<life::Replacing>()) state_ = life::Ready{};
}

bool NodeLife::drain() {
    if (!is<life::Ready>()) return false;
    state_ = life::Draining{};
    return true;
}

}  // namespace sky::detail
