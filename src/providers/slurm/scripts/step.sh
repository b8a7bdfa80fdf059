#!/bin/bash
# sky: starts a worker's step from the login node and waits until its launcher says where the
# worker listens.
#   step.sh DIR IN OUT PIDFILE PORT_MARK EXIT_MARK -- SRUN...
#     stdin: the launcher's settings (with the pool's token), written to DIR/IN (0600), opened
#     and removed before srun starts: they never reach a command line. SRUN... (srun and its
#     words) runs detached (a session of its own, immune to hangups: the worker does not depend
#     on the client's connection) with that file as its stdin and OUT as its output, its pid in
#     PIDFILE. Then, 60 s at most, until the step printed its port (that line is printed, exit
#     0) or ended (the output's last lines are printed, exit 1).
set -u
umask 077
dir=$1 in=$2 out=$3 pidfile=$4 port=$5 ended=$6
shift 6
[ "${1:-}" = -- ] && shift
cd "$dir" || exit 1
cat >"$in" || exit 1
exec 3<"$in"
rm -f "$in"
setsid nohup "$@" <&3 >"$out" 2>&1 3<&- &
step=$!
echo "$step" >"$pidfile"
exec 3<&-
for _ in $(seq 600); do
  if l=$(grep -m1 "^$port " "$out"); then
    printf '%s\n' "$l"
    exit 0
  fi
  grep -q "^$ended " "$out" && break
  kill -0 "$step" 2>/dev/null || break
  sleep 0.1
done
tail -n 20 "$out"
exit 1
