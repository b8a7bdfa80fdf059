#pragma once
/// \file Results as they complete (docs/api.md §2a): Completed, and the range that
/// pool.as_completed(...) returns for a map, a gather or a batch.
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "sky/detail/call.hpp"
#include "sky/export.hpp"
#include "sky/pending.hpp"

SKY_PUBLIC_BEGIN

/// One result of pool.as_completed(...): which item it is, and its value or error.
template <class T>
class Completed {
public:
    /// The item's position in the input (a map's element, a gather's or a batch's call).
    std::size_t index = 0;

    /// The value, or rethrows this item's error (other items are not affected).
    T& get() {
        if (error_) std::rethrow_exception(error_);
        return *value_;
    }
    /// True when get() throws.
    [[nodiscard]] bool failed() const noexcept { return error_ != nullptr; }
    /// This item's error, or null.
    [[nodiscard]] std::exception_ptr error() const noexcept { return error_; }

    static Completed success(std::size_t i, T v) {
        Completed c;
        c.index = i;
        c.value_.emplace(std::move(v));
        return c;
    }
    static Completed failure(std::size_t i, std::exception_ptr e) {
        Completed c;
        c.index = i;
        c.error_ = std::move(e);
        return c;
    }

private:
    std::optional<T> value_;
    std::exception_ptr error_;
};

/// The result of an item of a void function: get() only rethrows its error, if any.
template <>
class Completed<void> {
public:
    std::size_t index = 0;
    /// Rethrows this item's error, if any.
    void get() const {
        if (error_) std::rethrow_exception(error_);
    }
    [[nodiscard]] bool failed() const noexcept { return error_ != nullptr; }
    [[nodiscard]] std::exception_ptr error() const noexcept { return error_; }

    static Completed success(std::size_t i) {
        Completed c;
        c.index = i;
        return c;
    }
    static Completed failure(std::size_t i, std::exception_ptr e) {
        Completed c;
        c.index = i;
        c.error_ = std::move(e);
        return c;
    }

private:
    std::exception_ptr error_;
};

/// What pool.as_completed(...) returns: an input range of Completed<T>, in the order results
/// arrive. The work started when it was made; each result is delivered once; destroying it
/// (leaving the loop early) cancels what has not finished. Not copyable; iterators do not
/// survive a move of the range.
template <class T>
class Completions {
public:
    /// Turns finished item `item` of the batch into one or more Completed values.
    using Expand =
        std::function<void(std::size_t item, const detail::Outcome&, std::deque<Completed<T>>&)>;

    Completions(std::shared_ptr<detail::BatchState> state, Expand expand, std::size_t total)
        : state_(std::move(state)), expand_(std::move(expand)), total_(total) {}
    Completions(Completions&&) noexcept = default;
    Completions& operator=(Completions&&) = delete;
    Completions(const Completions&) = delete;
    Completions& operator=(const Completions&) = delete;
    ~Completions() { cancel(); }

    /// Cancels what has not finished: it is not run, or its result is dropped (the destructor
    /// does this). Iterating further delivers those items with a sky::CancelledError. True when
    /// something was cancelled.
    bool cancel() {
        if (!state_ || state_->ready() || !state_->cancel) return false;
        return state_->cancel();
    }
    /// How many results the range delivers in all (a map: one per element).
    [[nodiscard]] std::size_t size() const noexcept { return total_; }

    class iterator {
    public:
        using iterator_concept = std::input_iterator_tag;
        using value_type = Completed<T>;
        using difference_type = std::ptrdiff_t;

        iterator() = default;
        explicit iterator(Completions* r) : r_(r) {}
        Completed<T>& operator*() const { return *r_->current_; }
        Completed<T>* operator->() const { return &*r_->current_; }
        iterator& operator++() {
            r_->advance();
            return *this;
        }
        void operator++(int) { r_->advance(); }
        friend bool operator==(const iterator& i, std::default_sentinel_t) { return i.done(); }

    private:
        [[nodiscard]] bool done() const noexcept { return !r_ || !r_->current_; }
        Completions* r_ = nullptr;
    };

    /// Waits for the first result not yet delivered.
    iterator begin() {
        if (!current_) advance();
        return iterator(this);
    }
    std::default_sentinel_t end() const noexcept { return {}; }

private:
    void advance() {
        current_.reset();
        while (ready_.empty()) {
            std::size_t item = 0;
            if (!state_ || !state_->next_finished(item)) return;
            expand_(item, state_->outcomes[item], ready_);
        }
        current_.emplace(std::move(ready_.front()));
        ready_.pop_front();
    }

    std::shared_ptr<detail::BatchState> state_;
    Expand expand_;
    std::size_t total_ = 0;
    std::deque<Completed<T>> ready_;
    std::optional<Completed<T>> current_;
};

namespace detail {

/// A Completed for one decoded outcome of a call of result type R.
template <class R>
Completed<R> completed_from(std::size_t index, const Outcome& o) {
    try {
        if constexpr (std::is_void_v<R>) {
            take<R>(o);
            return Completed<R>::success(index);
        } else {
            return Completed<R>::success(index, take<R>(o));
        }
    } catch (...) {
        return Completed<R>::failure(index, std::current_exception());
    }
}

/// The value type of as_completed over a batch: a variant whose alternative I is member I.
template <class... Rs>
using batch_completed_t = std::variant<batch_value_t<Rs>...>;

template <class... Rs, std::size_t... I>
Completed<batch_completed_t<Rs...>> completed_batch_item(std::size_t item, const Outcome& o,
                                                         std::index_sequence<I...>) {
    using V = batch_completed_t<Rs...>;
    using Fn = Completed<V> (*)(std::size_t, const Outcome&);
    static constexpr Fn table[] = {+[](std::size_t i, const Outcome& x) -> Completed<V> {
        using R = std::tuple_element_t<I, std::tuple<Rs...>>;
        try {
            if constexpr (std::is_void_v<R>) {
                take<R>(x);
                return Completed<V>::success(i, V(std::in_place_index<I>));
            } else {
                return Completed<V>::success(i, V(std::in_place_index<I>, take<R>(x)));
            }
        } catch (...) {
            return Completed<V>::failure(i, std::current_exception());
        }
    }...};
    return table[item](item, o);
}

}  // namespace detail

SKY_PUBLIC_END
