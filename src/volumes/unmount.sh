# shellcheck shell=bash
# sky volumes: unmounts what mount.sh mounted and removes the credentials (idempotent). `dir`
# (this directory) and `sky_volumes` (how many volumes) are set above this text.
# shellcheck disable=SC2154  # dir and sky_volumes are set by the lines above this text
set -u
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO='sudo -n'
rm -f "$dir"/credentials.*
# Only a volume whose s3fs mount.sh started (its pid file) is unmounted, at the path mount.sh
# resolved, and only while the kernel's mount table has that s3fs mount at exactly that path:
# never a mount of someone else's. s3fs exits once its mount is gone; a busy mount is detached
# lazily and s3fs ended.
is_s3fs() { [ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2> /dev/null)" = s3fs ]; }
is_mounted() {
  local p=${1//\\/\\134}
  p=${p// /\\040}
  # shellcheck disable=SC2016  # awk's own fields
  P="$p" awk '{ for (k = 7; k <= NF; k++) if ($k == "-") { if ($5 == ENVIRON["P"] && $(k + 1) == "fuse.s3fs") f = 1; break } } END { exit !f }' /proc/self/mountinfo
}
detach() {
  if is_mounted "$1"; then
    fusermount -u -z "$1" 2> /dev/null || $SUDO umount -l "$1" 2> /dev/null
  fi
  true
}
unmount_one() {
  local i=$1 pid real
  [ -f "$dir/$i.pid" ] || return 0
  pid=$(cat "$dir/$i.pid")
  real=$(cat "$dir/$i.path" 2> /dev/null)
  if [ -n "$real" ] && is_mounted "$real"; then
    fusermount -u "$real" 2> /dev/null || $SUDO umount "$real" 2> /dev/null
  fi
  for _ in $(seq 30); do is_s3fs "$pid" || break; sleep 0.1; done
  if is_s3fs "$pid"; then
    [ -z "$real" ] || detach "$real"
    kill -TERM "$pid" 2> /dev/null
    for _ in $(seq 10); do is_s3fs "$pid" || break; sleep 0.1; done
    is_s3fs "$pid" && kill -KILL "$pid" 2> /dev/null
  fi
  # A mount whose s3fs died is left dangling ("Transport endpoint is not connected").
  [ -z "$real" ] || detach "$real"
  rm -f "$dir/$i.pid" "$dir/$i.path"
}
# In reverse order of mounting.
for ((i = sky_volumes - 1; i >= 0; i--)); do unmount_one "$i"; done
true
