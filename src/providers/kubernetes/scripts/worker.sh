#!/bin/bash
# Starts the pool's worker in this pod, detached from the exec stream that runs this script
# (closing an exec stream does not end what it started, and nothing of the worker's life may hang
# on one), and prints the port it listens on (127.0.0.1 only: the client comes through the API
# server's port-forward, which connects from inside the pod).
# $1: this worker's run directory (made here, 0700); $2: the program; $3: the image's home
# (env.sh); $4: idle seconds after which a worker that ended means the client is gone;
# $5: the pod's state directory (pod_main.sh); $6: the port mark; $7: the exit mark.
# stdin: the token's line, then the worker's environment as shell exports (never argv: ps shows
# argv to every user of the pod).
set -u
run=$1 exe=$2 img=$3 idle=$4 state=$5 mark_port=$6 mark_exit=$7
umask 077
mkdir -p "$run" && cd "$run" || exit 90
rm -f port exit
IFS= read -r t || exit 91
printf '%s\n' "$t" > token
unset t
exports=$(cat)
touch heartbeat "$state/started"
# The supervisor: runs the worker, records how it ended, and tells pod_main.sh to end the pod
# when the worker ended idle (its client was silent for the pool's idle_timeout).
(
  # shellcheck source=/dev/null
  [ -f "$img/env.sh" ] && . "$img/env.sh"
  eval "$exports"
  "$exe" --sky-worker < /dev/null > worker.log 2>&1 &
  w=$!
  echo "$w" > pid
  wait "$w"
  s=$?
  echo "$s" > exit.tmp && mv -f exit.tmp exit
  hb=$(stat -c %Y heartbeat 2>/dev/null || echo 0)
  if [ $(($(date +%s) - hb)) -ge "$idle" ]; then touch "$state/end"; fi
) < /dev/null > supervisor.log 2>&1 &
disown
for _ in $(seq 600); do
  if [ -s port ]; then
    echo "$mark_port $(cat port)"
    exit 0
  fi
  if [ -e exit ]; then
    echo "$mark_exit $(cat exit)"
    tail -n 20 worker.log
    exit 1
  fi
  sleep 0.1
done
echo "the worker did not start listening within 60 s"
tail -n 20 worker.log
exit 1
