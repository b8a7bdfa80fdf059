# shellcheck shell=bash
# sky_dir_is_ours DIR: true when nobody but root and this user can change what is in DIR (it is
# owned by one of them, and writable by no one else unless sticky): another user could swap a
# file written there, or move a mount point made there. Otherwise prints why and fails.
sky_dir_is_ours() {
  local owner mode
  if ! owner=$(stat -c %u -- "$1") || ! mode=$(stat -c %a -- "$1"); then
    echo "cannot inspect $1"
    return 1
  fi
  if [ "$owner" != 0 ] && [ "$owner" != "$(id -u)" ]; then
    echo "$1 belongs to another user (uid $owner)"
    return 1
  fi
  if [ $((8#$mode & 8#022)) -ne 0 ] && [ $((8#$mode & 8#1000)) -eq 0 ]; then
    echo "$1 is writable by other users (mode $mode)"
    return 1
  fi
}
