# shellcheck shell=bash
# On every node of the job, before sbcast: makes the pool's private directory that sbcast writes
# the program's archive into. Its name comes on stdin (never on a command line that other users
# of the node see in ps before it exists); it is made here with mode 0700, and one that exists
# and is not this user's own private directory is refused: another user of the node cannot
# create, replace or read what sbcast writes there. The marks it prints (sky_refused_mark,
# sky_incoming_mark) are set above this text.
# shellcheck disable=SC2154  # the marks are set by the lines above this text
set -u
umask 077
node=${SLURMD_NODENAME:-$(hostname -s)}
IFS= read -r dir || { echo "$sky_refused_mark $node no directory name on stdin"; exit 91; }
case $dir in
/tmp/sky-*) ;;
*) echo "$sky_refused_mark $node $dir is not a directory of sky's"; exit 91 ;;
esac
mkdir -m 700 -- "$dir" 2>/dev/null
if [ -L "$dir" ] || [ ! -d "$dir" ] || [ "$(stat -c '%u %a' -- "$dir")" != "$(id -u) 700" ]; then
  echo "$sky_refused_mark $node $dir exists and is not this user's private directory"
  exit 92
fi
echo "$sky_incoming_mark $node"
