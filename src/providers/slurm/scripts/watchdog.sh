#!/bin/bash
# A Slurm pool's watchdog on the login node: once the pool's client is gone (killed, crashed,
# its link lost) for idle_timeout, it cancels the pool's jobs; a pool's teardown ends it first.
# It watches the client's connection itself, never a process it has not proven to be its own:
#   watchdog.sh watch DIR IDLE NONCE channel -- CANCEL...
#       runs on an SSH exec channel that the client holds open for the pool's life: it writes an
#       empty line every 2 s, and a write that fails (the channel's sshd process, whatever it is
#       called, ended with the connection) means the client is gone;
#   watchdog.sh watch DIR IDLE NONCE pid PID START -- CANCEL...
#       a client on this machine: gone once process PID is no longer the one that started at
#       START (field 22 of /proc/PID/stat);
#   watchdog.sh check DIR NONCE    waits (10 s at most) until the watchdog started with NONCE
#                                  has recorded itself and runs;
#   watchdog.sh stop DIR           ends the recorded watchdog, only while it is that process.
# DIR/watchdog.pid holds "PID START NONCE" of the running watchdog. A new watchdog of the same
# pool (after a reconnect) ends the one before it.
set -u
umask 077

start_of() {
  local rest
  rest=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  printf '%s\n' "$rest" | cut -d' ' -f20
}

# True while the process recorded in DIR/watchdog.pid is the watchdog that recorded itself
# there (and its start time); sets pid and nonce.
recorded_alive() {
  local start
  pid='' start='' nonce=''
  read -r pid start nonce 2>/dev/null <"$1/watchdog.pid" || return 1
  case "$pid" in '' | *[!0-9]*) return 1 ;; esac
  [ -n "$start" ] && [ "$(start_of "$pid")" = "$start" ] &&
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "sky-watchdog watch $1 "
}

stop_recorded() {
  if recorded_alive "$1"; then
    kill -TERM "$pid" 2>/dev/null
  fi
  return 0
}

nap() {
  sleep "$1" &
  sleeper=$!
  wait "$sleeper"
  sleeper=
}

mode=${1:-}
case "$mode" in
stop)
  stop_recorded "$2"
  exit 0
  ;;
check)
  for _ in $(seq 100); do
    if recorded_alive "$2" && [ "$nonce" = "$3" ]; then
      exit 0
    fi
    sleep 0.1
  done
  echo "the watchdog did not start: $(tail -n 5 "$2/watchdog.log" 2>/dev/null)"
  exit 1
  ;;
watch) ;;
*)
  echo "usage: watchdog.sh watch|check|stop DIR ..." >&2
  exit 2
  ;;
esac

dir=$2 idle=$3 mine=$4 how=$5
shift 5
cd "$dir" || exit 1
exec 2>>watchdog.log
sleeper=
# Teardown (TERM) ends it at once, its sleep too; a hangup is not the client's teardown.
trap '[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; exit 0' TERM INT
trap '' HUP
case "$how" in
channel)
  trap '' PIPE
  alive() { printf '\n' 2>/dev/null; }
  ;;
pid)
  client=$1 client_start=$2
  shift 2
  alive() { [ "$(start_of "$client")" = "$client_start" ]; }
  ;;
*)
  echo "watchdog.sh: unknown way to watch: $how" >&2
  exit 2
  ;;
esac
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "watchdog.sh: no cancel command" >&2; exit 2; }

stop_recorded "$dir"
me=$(start_of $$) || exit 1
printf '%s %s %s\n' $$ "$me" "$mine" >watchdog.pid.$$ && mv -f watchdog.pid.$$ watchdog.pid || exit 1
while alive; do nap 2; done
echo "$(date -u +%FT%TZ) the client is gone; cancelling the pool's jobs in $idle s" >&2
left=$idle
while [ "$left" -gt 0 ]; do
  nap 1
  left=$((left - 1))
done
# Still the pool's watchdog (a newer one would have ended this one): the job goes.
if recorded_alive "$dir" && [ "$pid" = $$ ]; then
  rm -f watchdog.pid
fi
exec "$@"
