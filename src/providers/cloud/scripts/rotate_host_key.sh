# shellcheck shell=bash
# sky boot: replaces the host key the boot script installed (its launch data may be readable
# through the cloud's API), as root, over the pinned session. Finds the sshd serving this
# session, generates a fresh ed25519 key, moves it over the host key file that sshd loads with
# the pinned key, removes cloud-init's copies of the boot script, prints the new public key and
# makes sshd load it (SIGHUP).
# Set above this text: old_blob (the base64 blob of the pinned public key).
# shellcheck disable=SC2154  # old_blob is set by the lines above this text
set -eu
umask 077
# The sshd serving this session: the outermost sshd among this shell's ancestors.
p=$$
listener=
while [ "$p" -gt 1 ] 2>/dev/null; do
  [ "$(sed -n 's/^Name:[[:space:]]*//p' "/proc/$p/status")" = sshd ] && listener=$p
  p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status")
done
[ -n "$listener" ] || { echo 'no sshd among the session ancestors' >&2; exit 3; }
cfg=/etc/ssh/sshd_config
# shellcheck disable=SC2046  # the listener's argument words, split as its command line is
set -- $(tr '\0' ' ' < "/proc/$listener/cmdline")
while [ $# -gt 1 ]; do
  [ "$1" = -f ] && cfg=$2
  shift
done
key=
for k in $(sshd -T -f "$cfg" 2>/dev/null | awk '$1=="hostkey"{print $2}') \
  /etc/ssh/ssh_host_ed25519_key; do
  [ -f "$k" ] || continue
  if [ "$(ssh-keygen -y -f "$k" 2>/dev/null | awk '{print $2}')" = "$old_blob" ]; then
    key=$k
    break
  fi
done
[ -n "$key" ] || { echo 'sshd loads no file with the pinned key' >&2; exit 4; }
tmp=$(mktemp -d "$(dirname "$key")/.sky-hostkey.XXXXXX")
ssh-keygen -q -t ed25519 -N '' -C sky-host -f "$tmp/key" < /dev/null > /dev/null
chmod 600 "$tmp/key"
chmod 644 "$tmp/key.pub"
mv -f "$tmp/key.pub" "$key.pub"
mv -f "$tmp/key" "$key"
rmdir "$tmp"
# cloud-init's copies of the boot script: the key in them is dead now; drop them anyway.
rm -f /var/lib/cloud/instance/user-data.txt /var/lib/cloud/instance/user-data.txt.i \
  /var/lib/cloud/instance/scripts/part-001 2>/dev/null || true
cat "$key.pub"
kill -HUP "$listener"
sleep 1 # sshd re-executes; the next connection then sees the new key
