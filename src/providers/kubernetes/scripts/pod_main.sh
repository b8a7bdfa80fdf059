#!/bin/bash
# The main process of a sky pod (its container's command). It holds the pod, and with it the
# pod's GPUs, while the pool's worker may come or runs, and ends the pod (exit 0) when the
# worker's launcher says the pool's client is gone (it ended idle: "$state/end"), when no worker
# came within $2 seconds of the pod's start, or after a SIGTERM (a deletion, an eviction) once no
# other process runs in the container. Only this process gets the kubelet's SIGTERM: the worker
# serves on through the deletion's grace period, which is the ranks' time to save their step at
# the preemption notice (api.md §10a); the kubelet's SIGKILL at its end ends the pod. The worker
# itself is started through exec (worker.sh), never by this script: a pod holds no secret of the
# pool's in its spec.
# $1: the pod's state directory (made here, 0700); $2: seconds to wait for a first worker.
set -u
state=$1
first=$2
term=0
nap=
trap 'term=1' TERM INT
umask 077
mkdir -p "$state" || exit 90

# Whether a process other than this one and its nap runs in the container (sky's launcher, its
# worker, a command run through exec); zombies do not count. Builtins only: no fork.
others() {
  local d pid stat
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = "$$" ] && continue
    [ "$pid" = "$nap" ] && continue
    read -r stat < "$d/stat" 2> /dev/null || continue
    stat=${stat##*) }
    [ "${stat%% *}" = Z ] && continue
    return 0
  done
  return 1
}

i=0
while :; do
  [ -e "$state/end" ] && exit 0
  if [ "$term" = 1 ] && ! others; then exit 0; fi
  if [ ! -e "$state/started" ] && [ "$i" -ge "$first" ]; then
    echo "sky: no worker came within $first s; the pod ends" >&2
    exit 0
  fi
  sleep 1 &
  nap=$!
  wait "$nap"
  i=$((i + 1))
done
