#pragma once
// The bootstrap's shell (src/bootstrap/*.sh, embedded at build time).
#include <string_view>

namespace sky::detail::scripts {

/// image.sh: the steps of every image's bootstrap, reading the image's values from the sky_*
/// variables set before it (Image::bootstrap).
std::string_view image_sh();

}  // namespace sky::detail::scripts
