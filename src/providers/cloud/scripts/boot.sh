# shellcheck shell=bash
# sky boot: a cloud node's first boot, as root: the pinned host key (sshd serves only it), the
# client's key where the provider installs none, the power-off timer where the cloud wants it.
# Set above: sky_host_key, sky_host_pub, sky_authorized_key (or empty), sky_power_off_minutes
# (0: never).
# shellcheck disable=SC2154  # the sky_* variables are set above this text
set -u
umask 077
printf '%s\n' "$sky_host_key" > /etc/ssh/ssh_host_ed25519_key
printf '%s\n' "$sky_host_pub" > /etc/ssh/ssh_host_ed25519_key.pub
chmod 600 /etc/ssh/ssh_host_ed25519_key
chmod 644 /etc/ssh/ssh_host_ed25519_key.pub
if [ -n "$sky_authorized_key" ]; then
  mkdir -p /root/.ssh && chmod 700 /root/.ssh
  grep -qxF "$sky_authorized_key" /root/.ssh/authorized_keys 2>/dev/null ||
    printf '%s\n' "$sky_authorized_key" >> /root/.ssh/authorized_keys
  chmod 600 /root/.ssh/authorized_keys
fi
mkdir -p /etc/ssh/sshd_config.d
printf 'HostKey /etc/ssh/ssh_host_ed25519_key\n' > /etc/ssh/sshd_config.d/00-sky-hostkey.conf
systemctl restart ssh 2>/dev/null || systemctl restart sshd 2>/dev/null || service ssh restart
if [ "$sky_power_off_minutes" -gt 0 ]; then
  shutdown -h "+$sky_power_off_minutes" 'sky: pool hard timeout' 2>/dev/null || true
  # The node's watchdog may power this machine off only where this marker exists.
  mkdir -p /etc/sky && touch /etc/sky/power-off-on-expiry
fi
# This copy holds the host key (cloud-init's go when the client rotates it).
rm -f -- "$0" 2>/dev/null || true
