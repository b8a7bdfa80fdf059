#pragma once
// Local's image checks (src/providers/local/scripts/*.sh, embedded at build time).
#include <string_view>

namespace sky::detail::scripts {

/// apt_check.sh: which of the image's apt packages this machine lacks.
std::string_view apt_check_sh();
/// venv.sh: the image's Python interpreter and its venv, made once.
std::string_view venv_sh();

}  // namespace sky::detail::scripts
