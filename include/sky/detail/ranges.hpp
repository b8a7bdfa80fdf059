#pragma once
// The range concepts and accessors (std::ranges::input_range, sized_range, size, data ...) that
// sky::map and sky::shard take their input by. libstdc++ defines them in <bits/ranges_base.h>,
// about a tenth of <ranges> (whose views a sky program does not need from sky): taken from there
// where it exists, from <ranges> elsewhere.
#include <cstddef>  // defines __GLIBCXX__ where the library is libstdc++
#if defined(__GLIBCXX__) && __has_include(<bits/ranges_base.h>)
#include <bits/ranges_base.h>
#else
#include <ranges>
#endif
