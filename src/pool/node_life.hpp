#pragma once
// A node's life as the supervisor sees it: one state at a time (starting, ready, reconnecting,
// resyncing, replacing, lost, draining), each a struct holding only what that state needs, and
// named transitions between them. No threads, locks or I/O: PoolCore calls it under its lock and
// does what a transition tells it (open a reconnect window, resend calls, ask the backend why),
// so every rule of a node's life is unit-tested on its own (tests/unit/pool/test_node_life.cpp).
// Which calls a node holds stays the Scheduler's (pool/scheduler.hpp).
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <variant>

namespace sky::detail {

/// The clock of a node's life (the Scheduler's).
using LifeClock = std::chrono::steady_clock;

/// The supervisor ended the node's connection because its worker answered no heartbeat.
struct Silence {
    std::string reason;
    LifeClock::time_point since{};  ///< when the heartbeat that went unanswered was written
};

/// A dropped connection's reconnect window: it closes at `deadline`, and until then the node's
/// calls stay in flight.
struct ReconnectWindow {
    LifeClock::time_point dropped_at{};
    LifeClock::time_point deadline{};
    std::string drop_reason;   ///< why the connection dropped
    bool drop_silent = false;  ///< it was ended for silence
    int attempts = 0;
    std::string resume_error;  ///< why the last attempt failed
};

namespace life {
/// Its first connection is being made (the pool is starting).
struct Starting {
    /// The connection ended before the pool was active: handled once it is.
    struct Ended {
        std::string why;
        bool protocol_error = false;
    };
    std::optional<Ended> ended_early;
};
/// Connected; it takes calls. `silence` once the supervisor closed it for silence.
struct Ready {
    std::optional<Silence> silence;
};
/// Its connection dropped; the pool reconnects within the window.
struct Reconnecting {
    ReconnectWindow window;
};
/// The resumed worker's kept answers are arriving; the heartbeat sent after its ready frame
/// marks their end.
struct Resyncing {
    ReconnectWindow window;
    std::size_t resumed_answers = 0;  ///< answers the pool was waiting for
    std::size_t resumed_again = 0;    ///< answers it had already
};
/// A fresh worker (on a new machine, or the same one) is being started in its place.
struct Replacing {};
/// Gone. `why`: the supervisor's reason (a reconnect that failed), which names the loss unless
/// the backend knows better; empty when it has none.
struct Lost {
    std::string why;
};
/// Takes no new call; ended once its calls finish.
struct Draining {};
}  // namespace life

/// The rule for a new reconnect window: how long it stays open from the drop, and from the
/// heartbeat that went unanswered when the node was ended for silence.
struct WindowRule {
    LifeClock::duration after_drop{};
    LifeClock::duration after_silence{};
};

/// What the supervisor learns when a resync ends.
struct Resynced {
    std::size_t resumed_answers = 0;
    std::size_t resumed_again = 0;
    LifeClock::duration away{};
};

class NodeLife {
public:
    using State = std::variant<life::Starting, life::Ready, life::Reconnecting, life::Resyncing,
                               life::Replacing, life::Lost, life::Draining>;

    [[nodiscard]] const State& state() const noexcept { return state_; }
    template <class S>
    [[nodiscard]] bool is() const noexcept {
        return std::holds_alternative<S>(state_);
    }
    /// The state's name, for messages and tests.
    [[nodiscard]] const char* name() const noexcept;
    /// The open reconnect window (reconnecting or resyncing), or nullptr.
    [[nodiscard]] const ReconnectWindow* window() const noexcept;
    /// The supervisor's reason for the node's end, when it has one: its silence (ready), or a
    /// reconnect given up (lost). Empty otherwise.
    [[nodiscard]] std::string ended_reason() const;

    // Starting.
    /// The connection ended while the pool was still starting (kept until started()).
    void ended_while_starting(std::string why, bool protocol_error);
    /// The pool is active: starting -> ready. Returns the early end, if there was one.
    std::optional<life::Starting::Ended> started();

    // Ready.
    /// The worker left a written heartbeat unanswered since `since`: records why (once; false
    /// when the node is not ready or was ended for silence already).
    bool silent(std::string reason, LifeClock::time_point since);

    // A dropped connection.
    /// The connection dropped at `now`: opens a window by `rule` (from the drop, or from the
    /// silence that came first), or keeps the one already open (a resumed connection that drops
    /// again cannot extend it): -> reconnecting. False, and the state unchanged, when a new
    /// window would already be closed.
    bool dropped(const std::string& why, LifeClock::time_point now, WindowRule rule);
    /// One reconnect attempt begins: counts it; the window, or nullptr when none is open.
    const ReconnectWindow* attempt();
    /// The attempt failed: why (the next attempt or the loss names it). The window, or nullptr
    /// when none is open.
    const ReconnectWindow* attempt_failed(std::string why);
    /// The resumed worker's handshake is done: -> resyncing (false when no window is open).
    bool resumed();
    /// During a resync, an answer arrived that was still awaited (`awaited`) or not.
    void resumed_answer(bool awaited);
    /// The worker answered the heartbeat after its kept answers: resyncing -> ready.
    std::optional<Resynced> caught_up(LifeClock::time_point now);
    /// The window closed, or the worker is gone (`worker_gone`): -> lost, with the reason that
    /// names the loss; returns it.
    std::string give_up(const std::string& why, bool worker_gone, LifeClock::time_point now);

    // Loss and replacement.
    /// The node's end is known: -> lost (keeping a reason give_up gave).
    void lose();
    /// A replacement starts: lost -> replacing.
    void replace();
    /// The replacement's worker is ready: replacing -> ready.
    void replaced();

    // Draining.
    /// Takes no new call from now: ready -> draining (false from another state).
    bool drain();

private:
    ReconnectWindow* open_window() noexcept;

    State state_{life::Starting{}};
};

}  // namespace sky::detail
