# shellcheck shell=bash
# sky volumes: mounts this pool's volumes with s3fs (one foreground process each, its pid, mount
# point and log in this directory); unmount.sh undoes it. What to mount comes in the variables
# set above this text (plan_volumes writes them):
#   dir              this directory (the pool's private run directory's volumes/)
#   sky_failed_mark, sky_mounted_mark   the marks that say which volume failed, or that all are
#   sky_mount_wait   seconds each mount may take
#   sky_guard_wait   seconds the guard waits for the node's watchdog before it unmounts
#   sky_volumes      how many volumes; sky_volume_I: volume I's mount path, s3fs source, options
# shellcheck disable=SC2154  # every sky_* variable and dir are set by the lines above this text
set -u
umask 077
export DEBIAN_FRONTEND=noninteractive
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO='sudo -n'
failed() {
  echo "$sky_failed_mark $*"
  rm -f "$dir"/credentials.*
  exit 1
}
# s3fs where it is missing, as the image's apt phase installs packages.
if ! command -v s3fs > /dev/null 2>&1; then
  if ! (umask 022; $SUDO apt-get update -qq && $SUDO apt-get install -y -qq \
      --no-install-recommends s3fs) > "$dir/apt.log" 2>&1; then
    tail -n 20 "$dir/apt.log"
    failed - s3fs is not installed on the node and apt-get could not install it
  fi
fi
[ -c /dev/fuse ] || failed - /dev/fuse is missing: this node cannot mount FUSE file systems

# safe_path INDEX PATH: every directory from PATH up to / that exists is one nobody else can
# change (sky_dir_is_ours): nobody else can rename a directory on the way and put something
# else at the mount point (and so redirect an unmount).
safe_path() {
  local i=$1 d=$2 why
  while :; do
    if [ -L "$d" ]; then failed "$i" "$d" is a symbolic link; fi
    if [ -e "$d" ] && ! why=$(sky_dir_is_ours "$d"); then
      failed "$i" "$why, who could move the mount point"
    fi
    [ "$d" = / ] && return 0
    d=$(dirname -- "$d")
  done
}

# mount_one INDEX MOUNT_PATH SOURCE S3FS_OPTIONS...: resolves the mount point once (kept in
# INDEX.path for unmount.sh), starts s3fs there and waits until the mount answers (three looks
# in a row: a bucket that fails s3fs's own check ends it just after mounting).
mount_one() {
  local i=$1 mp=$2 src=$3 real pid ok=0
  shift 3
  if ! real=$(realpath -m -- "$mp") || [ -z "$real" ]; then failed "$i" cannot resolve "$mp"; fi
  safe_path "$i" "$real"
  if [ ! -d "$real" ]; then
    (umask 022; $SUDO mkdir -p "$real") || failed "$i" cannot create the mount point "$mp"
    [ -z "$SUDO" ] || $SUDO chown "$(id -u):$(id -g)" "$real" ||
      failed "$i" cannot give "$mp" to "$(id -un)"
  fi
  safe_path "$i" "$real"
  ! mountpoint -q "$real" || failed "$i" "$mp" is already a mount point
  printf '%s\n' "$real" > "$dir/$i.path"
  (
    unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWSACCESSKEYID \
      AWSSECRETACCESSKEY AWSSESSIONTOKEN AWS_CREDENTIAL_FILE
    # shellcheck disable=SC1090  # the volume's keys, written beside this script
    . "$dir/credentials.$i" || exit 99
    exec setsid s3fs "$src" "$real" "$@"
  ) > "$dir/$i.log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$dir/$i.pid"
  for _ in $(seq $((sky_mount_wait * 10))); do
    kill -0 "$pid" 2> /dev/null || break
    if mountpoint -q "$real"; then
      ok=$((ok + 1))
      [ "$ok" -lt 3 ] || return 0
    else
      ok=0
    fi
    sleep 0.1
  done
  tail -n 20 "$dir/$i.log"
  if kill -0 "$pid" 2> /dev/null; then
    failed "$i" s3fs did not mount "$mp" within "$sky_mount_wait" s
  fi
  failed "$i" s3fs exited
}

# Should the client vanish before the node's watchdog starts (it starts with the worker, after
# this phase), nothing would ever unmount: a guard does, unless the watchdog appears in time or
# the run directory goes (stop()).
# shellcheck disable=SC2016  # the guard's own script: its $0..$2 are its arguments
( setsid bash -c 'for t in $(seq "$2"); do [ -e "$0/watchdog.pid" ] && exit 0;
    [ -d "$1" ] || exit 0; sleep 1; done; bash "$1/unmount.sh"' \
    "$(dirname -- "$dir")" "$dir" "$sky_guard_wait" > /dev/null 2>&1 < /dev/null & )

for ((i = 0; i < sky_volumes; i++)); do
  declare -n volume="sky_volume_$i"
  mount_one "$i" "${volume[@]}"
  unset -n volume
done
# s3fs has read its keys: the files go now (unmount.sh removes them too, after a failure).
rm -f "$dir"/credentials.*
echo "$sky_mounted_mark"
