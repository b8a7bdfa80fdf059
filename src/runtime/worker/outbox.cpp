#include "runtime/worker/outbox.hpp"

#include <cstring>

namespace sky::detail {

namespace {
constexpr std::size_t direct_write = 256u << 10;  // larger frames are written without a copy

bool is_answer(MsgType t) noexcept { return t == MsgType::result || t == MsgType::error; }

MsgType frame_type(const Buffer& f) noexcept {
    MsgType t;
    std::memcpy(&t, f.data() + 5, 1);
    return t;
}
std::uint64_t frame_call_id(const Buffer& f) noexcept {
    std::uint64_t id;
    std::memcpy(&id, f.data() + 8, 8);
    return id;
}
}  // namespace

Outbox::~Outbox() {
    {
        std::lock_guard lk(m_);
        stop_ = true;
    }
    soon_cv_.notify_all();
    if (flusher_.joinable()) flusher_.join();
}

void Outbox::started_soon(std::uint64_t id) {
    bool wake = false;
    {
        std::lock_guard lk(m_);
        const auto now = std::chrono::steady_clock::now();
        wake = flusher_idle_;
        soon_.emplace_back(id, now);
        last_busy_ = now;
        if (!flusher_.joinable()) flusher_ = std::thread([this] { flusher(); });
    }
    // Only a flusher asleep until woken needs the (syscall) wake-up; one that was busy lately
    // looks again within the bound by itself.
    if (wake) soon_cv_.notify_one();
}

void Outbox::answered_locked(std::uint64_t id) {
    for (auto it = soon_.begin(); it != soon_.end(); ++it)
        if (it->first == id) {
            soon_.erase(it);
            return;
        }
}

void Outbox::flusher() {
    // Busy this recently, the flusher polls every started_bound instead of sleeping until a
    // started_soon() or frame_soon() wakes it: calls a few microseconds apart then cost no
    // wake-up each.
    constexpr auto linger = std::chrono::milliseconds(50);
    std::unique_lock lk(m_);
    while (!stop_) {
        const auto now = std::chrono::steady_clock::now();
        std::optional<std::chrono::steady_clock::time_point> due;
        if (!soon_.empty()) due = soon_.front().second + started_bound;  // the oldest first
        if (batched_since_ && (!due || *batched_since_ + started_bound < *due))
            due = *batched_since_ + started_bound;
        if (!due) {
            if (now - last_busy_ < linger) {
                soon_cv_.wait_until(lk, now + started_bound);
                continue;
            }
            flusher_idle_ = true;
            soon_cv_.wait(lk, [&] { return stop_ || !soon_.empty() || batched_since_; });
            flusher_idle_ = false;
            continue;
        }
        if (now < *due) {
            soon_cv_.wait_until(lk, *due);
            continue;
        }
        try {
            flush_locked();  // writes every pending "started" and the batched answers
        } catch (...) {
            // A broken connection: the reader sees it and ends the session.
        }
        soon_.clear();  // written, or nowhere to write them
        batched_ = 0;
        batched_since_.reset();
    }
}

void Outbox::set_resumable(bool on) {
    std::lock_guard lk(m_);
    resumable_ = on;
}

const Outbox::Parts& Outbox::keep_locked(std::uint64_t id, Parts&& f) {
    if (auto old = kept_by_id_.find(id); old != kept_by_id_.end()) kept_.erase(old->second);
    const std::uint64_t seq = next_seq_++;
    kept_by_id_[id] = seq;
    return kept_.emplace(seq, std::make_pair(id, std::move(f))).first->second.second;
}

void Outbox::append(MsgType type, std::uint64_t id, std::span<const std::byte> payload) {
    std::lock_guard lk(m_);
    if (is_answer(type)) answered_locked(id);
    if (resumable_ && is_answer(type)) {
        Parts f;
        append_frame(f.head, type, id, payload);
        keep_locked(id, std::move(f));
    }
    append_frame(buf_, type, id, payload);
}

void Outbox::log(std::uint64_t id, std::uint8_t stream, std::string_view line) {
    std::lock_guard lk(m_);
    append_log_frame(buf_, id, stream, unix_now(), line);
    flush_locked();
}

void Outbox::frame(Buffer&& f, bool flush_now, OwnedBytes tail) {
    std::lock_guard lk(m_);
    add_locked(std::move(f), std::move(tail));
    if (flush_now) flush_locked();
}

void Outbox::frame_soon(Buffer&& f, OwnedBytes tail) {
    bool wake = false;
    {
        std::lock_guard lk(m_);
        add_locked(std::move(f), std::move(tail));
        if (buf_.empty()) return;  // a large frame, written already with the batch before it
        if (++batched_ >= batch_answers) return flush_locked();
        // The clock is read for the first answer of a batch only: the bound counts from it.
        if (!batched_since_) {
            const auto now = std::chrono::steady_clock::now();
            batched_since_ = now;
            last_busy_ = now;
            wake = flusher_idle_;
        }
        if (!flusher_.joinable()) flusher_ = std::thread([this] { flusher(); });
    }
    if (wake) soon_cv_.notify_one();
}

void Outbox::add_locked(Buffer&& f, OwnedBytes&& tail) {
    const bool answer = f.size() >= frame_header_size && is_answer(frame_type(f));
    if (answer) answered_locked(frame_call_id(f));
    Parts parts{std::move(f), std::move(tail)};
    // A kept answer is written from where it is kept: a large result is not copied.
    const std::uint64_t id = answer ? frame_call_id(parts.head) : 0;
    const Parts& out = answer && resumable_ ? keep_locked(id, std::move(parts)) : parts;
    send_locked(out);
}

void Outbox::send_locked(const Parts& f) {
    const std::size_t size = f.head.size() + f.tail.size();
    if (buf_.size() + size > direct_write) flush_locked();
    if (size > direct_write) {
        std::span<const std::byte> both[] = {f.head.span(), f.tail.span()};
        write_locked(both);
        return;
    }
    buf_.append(f.head.data(), f.head.size());
    buf_.append(f.tail.span().data(), f.tail.size());
}

void Outbox::flush() {
    std::lock_guard lk(m_);
    flush_locked();
}

void Outbox::flush_locked() {
    // The calls still running that have not said so yet go with this write: it costs nothing.
    if (!soon_.empty()) {
        Buffer started;
        for (auto& [id, since] : soon_) append_frame(started, MsgType::started, id, {});
        soon_.clear();
        started.append(buf_.data(), buf_.size());
        buf_ = std::move(started);
    }
    batched_ = 0;
    batched_since_.reset();
    if (buf_.empty()) return;
    std::span<const std::byte> one[] = {buf_.span()};
    write_locked(one);
    buf_.clear();
}

void Outbox::write_locked(std::span<const std::span<const std::byte>> parts) {
    if (!t_) return;  // no connection: the answers among these frames are kept
    if (!resumable_) {
        t_->write_all(parts);
        return;
    }
    try {
        t_->write_all(parts);
    } catch (...) {
        // The reader sees the broken connection too; what was kept goes out after a resume.
        t_ = nullptr;
    }
}

void Outbox::detach() {
    std::lock_guard lk(m_);
    t_ = nullptr;
    buf_.clear();
    batched_ = 0;
    batched_since_.reset();
    soon_.clear();  // announced again after a resume (attach)
}

void Outbox::attach(Transport& t, const std::function<std::vector<std::uint64_t>()>& running) {
    std::lock_guard lk(m_);
    t_ = &t;
    buf_.clear();
    soon_.clear();
    // Under the lock: a call that starts meanwhile says so after these, on this connection.
    for (auto id : running()) append_frame(buf_, MsgType::started, id, {});
    for (auto& [seq, kept] : kept_) send_locked(kept.second);
    flush_locked();
}

void Outbox::ack(std::span<const std::uint64_t> call_ids) {
    std::lock_guard lk(m_);
    for (auto id : call_ids) {
        auto it = kept_by_id_.find(id);
        if (it == kept_by_id_.end()) continue;
        kept_.erase(it->second);
        kept_by_id_.erase(it);
    }
}

bool Outbox::resend(std::uint64_t id) {
    std::lock_guard lk(m_);
    auto it = kept_by_id_.find(id);
    if (it == kept_by_id_.end()) return false;
    send_locked(kept_.at(it->second).second);
    flush_locked();
    return true;
}

std::size_t Outbox::kept() const {
    std::lock_guard lk(m_);
    return kept_.size();
}

}  // namespace sky::detail
