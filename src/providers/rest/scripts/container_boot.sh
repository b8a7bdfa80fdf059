# shellcheck shell=bash
# sky: a container node's first boot: sshd (installed when missing), the client's key, the pool's
# boot script, then an sshd serving its host key. Set above: sky_key, sky_boot.
# shellcheck disable=SC2154  # sky_key and sky_boot are set above this text
umask 077
if ! [ -x /usr/sbin/sshd ]; then
  (umask 022; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
    apt-get install -y -qq openssh-server) > /dev/null 2>&1 ||
    (apk add --no-cache openssh bash) > /dev/null 2>&1 || true
fi
mkdir -p /run/sshd /root/.ssh /etc/ssh && chmod 700 /root/.ssh
grep -qxF "$sky_key" /root/.ssh/authorized_keys 2>/dev/null ||
  printf '%s\n' "$sky_key" >> /root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
printf '%s\n' "$sky_boot" > /tmp/sky-boot.sh
bash /tmp/sky-boot.sh > /tmp/sky-boot.log 2>&1
rm -f /tmp/sky-boot.sh
if pgrep -x sshd > /dev/null 2>&1; then pkill -HUP -x sshd; else /usr/sbin/sshd; fi
