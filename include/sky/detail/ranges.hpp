#pragma once
// The range concepts and aliases that sky::map and sky::shard take their input by, written over
// what the standard's <iterator> provides (the range access customization points
// std::ranges::begin, end, size and data, and the iterator concepts): as the standard's
// <ranges> defines them, without the views a sky program does not need from sky (<ranges>
// costs a program's build a good part of what the standard headers cost it: bench/compile).
#include <concepts>
#include <iterator>
#include <type_traits>
#include <utility>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

namespace detail::ranges {

/// std::ranges::iterator_t.
template <class R>
using iterator_t = decltype(std::ranges::begin(std::declval<R&>()));
/// std::ranges::range_value_t.
template <class R>
using range_value_t = std::iter_value_t<iterator_t<R>>;
/// std::ranges::range_reference_t.
template <class R>
using range_reference_t = std::iter_reference_t<iterator_t<R>>;

/// std::ranges::range: begin and end.
template <class R>
concept range = requires(R& r) {
    std::ranges::begin(r);
    std::ranges::end(r);
};
/// std::ranges::input_range.
template <class R>
concept input_range = range<R> && std::input_iterator<iterator_t<R>>;
/// std::ranges::sized_range: its size is known without walking it.
template <class R>
concept sized_range = range<R> && requires(R& r) {
    std::ranges::size(r);
};
/// std::ranges::random_access_range.
template <class R>
concept random_access_range = range<R> && std::random_access_iterator<iterator_t<R>>;
/// std::ranges::contiguous_range: its elements are one array (std::ranges::data).
template <class R>
concept contiguous_range = random_access_range<R> && std::contiguous_iterator<iterator_t<R>> &&
    requires(R& r) {
    { std::ranges::data(r) } -> std::same_as<std::add_pointer_t<range_reference_t<R>>>;
};

}  // namespace detail::ranges

SKY_PUBLIC_END
