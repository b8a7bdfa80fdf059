#include "runtime/worker/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <typeinfo>

#include "runtime/worker/crash_handler.hpp"
#include "runtime/worker_context.hpp"
#include "sky/detail/registry.hpp"
#include "sky/detail/serialize.hpp"
#include "util/text.hpp"

namespace sky::detail {

Buffer error_frame(std::uint64_t id, const ErrorMsg& e) {
    Buffer p;
    save_to(p, e);
    Buffer out;
    append_frame(out, MsgType::error, id, p.span());
    return out;
}

namespace {
// The call's payload as a Buffer of its own: a block of its size (a small call's payload is a few
// dozen bytes; a growing buffer's first block is 256), taken over when the frame owns one.
Buffer payload_of(Frame& f) {
    if (f.owned.data() == f.payload.data() && f.owned.size() == f.payload.size())
        return f.take_payload();
    Buffer b(f.payload.size());
    b.append(f.payload.data(), f.payload.size());
    return b;
}
}  // namespace

Executor::Executor(WorkerCore& core, Outbox& out, OutputCapture& capture, PluginEnv plugin_env)
    : core_(core), out_(out), capture_(capture), plugin_env_(std::move(plugin_env)) {}

void Executor::start(int threads) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this, i] { run(i); });
}

bool Executor::submit(Frame& f) {
    bool wake = false;
    {
        std::lock_guard lk(m_);
        if (!known_.insert(f.header.call_id).second) return false;
        queue_.push_back({f.header.call_id, payload_of(f), f.header.flags});
        queued_.store(queue_.size(), std::memory_order_relaxed);
        // The reader wakes an idle executor when it has read everything there is (kick()), or
        // when calls pile up before: one wake-up for a read's worth of calls, not one each.
        wake = idle_ > 0 && queue_.size() >= kick_at;
    }
    if (wake) cv_.notify_all();
    return true;
}

void Executor::kick() {
    std::size_t wake = 0;
    {
        std::lock_guard lk(m_);
        wake = std::min<std::size_t>(static_cast<std::size_t>(idle_), queue_.size());
    }
    if (wake > 1)
        cv_.notify_all();
    else if (wake == 1)
        cv_.notify_one();
}

std::vector<std::uint64_t> Executor::started() const {
    std::lock_guard lk(m_);
    std::vector<std::uint64_t> ids(started_.begin(), started_.end());
    std::sort(ids.begin(), ids.end());
    return ids;
}

void Executor::run(int slot) {
    worker_slot = slot;
    CrashScope crash_scope;  // a crash in a call is reported, also a stack overflow
    for (;;) {
        Job j;
        bool wake_other = false;
        {
            std::unique_lock lk(m_);
            ++idle_;
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            --idle_;
            if (stop_ && queue_.empty()) return;
            j = std::move(queue_.front());
            queue_.pop_front();
            queued_.store(queue_.size(), std::memory_order_relaxed);
            // More calls wait and another executor sleeps: it takes the next one.
            wake_other = idle_ > 0 && !queue_.empty();
        }
        if (wake_other) cv_.notify_one();
        Answer a = execute(j);
        bool broken = false;
        if (!a.frame.empty()) {  // empty: dropped before it ran, answered already
            try {
                // With more calls queued here, the answer waits (within a bound) to leave with
                // theirs; the last answer of a run goes at once.
                if (queued_.load(std::memory_order_relaxed) > 0)
                    out_.frame_soon(std::move(a.frame), std::move(a.tail));
                else
                    out_.frame(std::move(a.frame), true, std::move(a.tail));
            } catch (...) {
                broken = true;  // the connection is gone, and the session with it
            }
        }
        {
            // After the answer is in the outbox: a duplicate of this call meanwhile is not run.
            std::lock_guard lk(m_);
            if (!keep_answered_) known_.erase(j.id);
            started_.erase(j.id);
        }
        if (broken) return;
    }
}

bool Executor::announce(const Job& j) {
    const bool at_most_once = (j.flags & call_flag_at_most_once) != 0;
    {
        // Registered before it is announced: a resumed connection announces it again.
        std::lock_guard lk(m_);
        started_.insert(j.id);
        if (at_most_once) confirms_[j.id] = Confirm::waiting;
    }
    if (!at_most_once) {
        // Within a millisecond, or not at all when the answer comes first: a crash meanwhile
        // is no loss (its report names the calls running).
        out_.started_soon(j.id);
        return true;
    }
    try {
        out_.append(MsgType::started, j.id, {});
        out_.flush();
    } catch (...) {
        // The connection broke: the reader sees it too.
    }
    // Until the client counts the call as started, running it could make a lost node's call
    // run twice (the client would retry a call it believes never started).
    std::unique_lock lk(m_);
    confirm_cv_.wait(lk, [&] { return stop_ || confirms_[j.id] != Confirm::waiting; });
    const bool run = confirms_[j.id] == Confirm::confirmed;
    confirms_.erase(j.id);
    return run;
}

void Executor::keep_answered(bool on) {
    std::lock_guard lk(m_);
    keep_answered_ = on;
}

void Executor::forget(std::span<const std::uint64_t> call_ids) {
    std::lock_guard lk(m_);
    if (!keep_answered_) return;
    // The client sends a call again only while it has no answer: an acknowledged one never.
    for (auto id : call_ids) known_.erase(id);
}

void Executor::confirm(std::uint64_t id) {
    {
        std::lock_guard lk(m_);
        auto it = confirms_.find(id);
        if (it == confirms_.end() || it->second != Confirm::waiting) return;
        it->second = Confirm::confirmed;
    }
    confirm_cv_.notify_all();
}

void Executor::cancel(std::uint64_t id) {
    bool queued = false;
    bool waiting = false;
    {
        std::lock_guard lk(m_);
        for (auto it = queue_.begin(); it != queue_.end(); ++it)
            if (it->id == id) {
                queue_.erase(it);
                queued_.store(queue_.size(), std::memory_order_relaxed);
                known_.erase(id);
                queued = true;
                break;
            }
        if (auto it = confirms_.find(id); it != confirms_.end() && it->second == Confirm::waiting) {
            it->second = Confirm::dropped;
            waiting = true;
        }
    }
    if (waiting) confirm_cv_.notify_all();  // its executor answers
    if (queued) send_cancelled(id);
}

void Executor::send_cancelled(std::uint64_t id) {
    ErrorMsg e{ErrorMsg::cancelled, "sky::CancelledError", "cancelled before it started", {}};
    Buffer p;
    save_to(p, e);
    try {
        out_.append(MsgType::error, id, p.span());
        out_.flush();
    } catch (...) {
    }
}

void Executor::stop() {
    {
        std::lock_guard lk(m_);
        stop_ = true;
        queue_.clear();
        queued_.store(0, std::memory_order_relaxed);
    }
    cv_.notify_all();
    confirm_cv_.notify_all();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
}

Executor::Answer Executor::execute(const Job& j) {
    const std::uint64_t id = j.id;
    CallHeader c;
    CallPlugin plugin;
    try {
        c = decode_call(decode_call_plugin(j.payload.span(), j.flags, plugin));
    } catch (const std::exception& e) {
        return {error_frame(id, {ErrorMsg::bad_arguments, "sky::ProtocolError", e.what(), {}})};
    }
    Lookup l = find_function(c.function, c.signature);
    if (!l.entry) {
        if (l.name_known)
            return {error_frame(id, {ErrorMsg::signature_mismatch,
                                     "sky::RemoteError",
                                     fmt::format("function '{}' exists on this worker with "
                                                 "another signature (the client and the worker "
                                                 "were built from different sources)",
                                                 c.function),
                                     {}})};
        return {error_frame(id, {ErrorMsg::unknown_function,
                                 "sky::RemoteError",
                                 fmt::format("no function named '{}' is registered on this "
                                             "worker (is it used with sky::compute in this "
                                             "program?)",
                                             c.function),
                                 {}})};
    }
    if (!announce(j)) {
        send_cancelled(id);
        return {};
    }
    // A distributed call: its framework's rendezvous variables exist while it runs, and only
    // then (rendezvous.hpp: ScopedEnv says what concurrent calls in one process share).
    std::optional<ScopedEnv> env;
    if (plugin.kind != PluginSpec::none) {
        try {
            env.emplace(plugin_env_(plugin));
        } catch (const std::exception& e) {
            return {error_frame(id, {ErrorMsg::exception, "sky::Error", e.what(), {}})};
        }
    }
    CallContext ctx;
    ctx.call_id = id;
    core_.running.fetch_add(1);
    CrashScope::set_call(id);
    capture_.enter(&ctx);
    Answer a;
    Buffer& out = a.frame;
    // Room for the header and a small result in one block: no second allocation as it grows.
    out.reserve(frame_header_size + 40);
    out.resize(frame_header_size);
    ErrorMsg err;
    bool ok = false;
    try {
        l.entry->invoke(c.args, out);
        // A large result of numbers was handed over, not copied (save_result): it follows the
        // frame from where the function returned it.
        a.tail = take_owned_result(out);
        ok = true;
    } catch (...) {
        try {
            (void)take_owned_result(out);  // nothing may be left for a later call on this thread
        } catch (...) {
        }
        auto d = current_exception_description();
        err = {ErrorMsg::exception, std::move(d.type_name), std::move(d.message), {}};
    }
    capture_.leave();
    CrashScope::set_call(0);
    env.reset();
    core_.running.fetch_sub(1);
    if (ok) {
        encode_header(out.data(), MsgType::result, id,
                      out.size() - frame_header_size + a.tail.size());
        return a;
    }
    {
        std::lock_guard lk(ctx.m);
        err.log_tail.assign(ctx.tail.begin(), ctx.tail.end());
    }
    return {error_frame(id, err)};
}

}  // namespace sky::detail
