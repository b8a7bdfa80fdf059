#pragma once
// An image's pip settings, never as command-line words that `ps` shows every user: a node's
// bootstrap script and a Local node both give pip the requirements in a private (0600) file
// (`pip install -r`), the extra index URL in its environment (PIP_EXTRA_INDEX_URL, readable by
// the user and root only) without its `user:password@`, and those credentials in a private
// netrc file (NETRC; the user's own ~/.netrc entries come first in it, so they still count).
// pip's own subprocesses (build isolation) get the URL in their argument list, never the
// credentials.
#include <string>

#include "sky/image.hpp"

namespace sky::detail {

/// What pip is given for an image's packages.
struct PipFiles {
    std::string requirements;     ///< `pip install -r`: one requirement a line
    std::string extra_index_url;  ///< without credentials; empty when there is none
    std::string netrc;            ///< a netrc entry with the URL's credentials; empty: none
};

/// The files for `image` (validated: no requirement or URL holds a line break).
[[nodiscard]] PipFiles pip_files(const Image& image);

}  // namespace sky::detail
