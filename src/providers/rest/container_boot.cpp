#include "providers/rest/container_boot.hpp"

#include <fmt/format.h>

#include "node/scripts.hpp"
#include "providers/rest/scripts.hpp"
#include "util/text.hpp"

namespace sky::detail {

std::string container_boot_script(const std::string& boot_script,
                                  const std::string& authorized_key) {
    scripts::ScriptValues v(
        "sky: sshd for this container, the client's key, the pool's boot script");
    v.word("sky_key", trim(authorized_key)).text("sky_boot", trim(boot_script));
    return v.then({scripts::container_boot_sh()});
}

std::string container_start_command(const std::string& variable) {
    return fmt::format(
        "bash -c 'printf \"%s\" \"${0}\" | env -u {0} bash; exec env -u {0} sleep infinity'",
        variable);
}

}  // namespace sky::detail
