#include "providers/rest/container_boot.hpp"

#include <fmt/format.h>

#include "util/shell.hpp"
#include "util/text.hpp"

namespace sky::detail {

std::string container_boot_script(const std::string& boot_script,
                                  const std::string& authorized_key) {
    return fmt::format(
        "#!/bin/bash\n"
        "# sky: sshd for this container, the client's key, then the pool's boot script.\n"
        "umask 077\n"
        "if ! [ -x /usr/sbin/sshd ]; then\n"
        "  (umask 022; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && "
        "apt-get install -y -qq openssh-server) >/dev/null 2>&1 || "
        "(apk add --no-cache openssh bash) >/dev/null 2>&1 || true\n"
        "fi\n"
        "mkdir -p /run/sshd /root/.ssh /etc/ssh && chmod 700 /root/.ssh\n"
        "k={key}\n"
        "grep -qxF \"$k\" /root/.ssh/authorized_keys 2>/dev/null || "
        "printf '%s\\n' \"$k\" >> /root/.ssh/authorized_keys\n"
        "chmod 600 /root/.ssh/authorized_keys\n"
        "cat > /tmp/sky-boot.sh <<'SKY_BOOT_SCRIPT_END'\n"
        "{boot}\n"
        "SKY_BOOT_SCRIPT_END\n"
        "bash /tmp/sky-boot.sh >/tmp/sky-boot.log 2>&1\n"
        "rm -f /tmp/sky-boot.sh\n"
        "if pgrep -x sshd >/dev/null 2>&1; then pkill -HUP -x sshd; else /usr/sbin/sshd; fi\n",
        fmt::arg("key", shell_quote(std::string(trim(authorized_key)))),
        fmt::arg("boot", std::string(trim(boot_script))));
}

std::string container_start_command(const std::string& variable) {
    return fmt::format(
        "bash -c 'printf \"%s\" \"${0}\" | env -u {0} bash; exec env -u {0} sleep infinity'",
        variable);
}

}  // namespace sky::detail
