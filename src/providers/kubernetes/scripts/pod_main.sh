#!/bin/bash
# The main process of a sky pod (its container's command). It holds the pod, and with it the
# pod's GPUs, while the pool's worker may come or runs, and ends the pod (exit 0) when the
# worker's launcher says the pool's client is gone (it ended idle: "$state/end"), when no worker
# came within $2 seconds of the pod's start, or on SIGTERM (a deletion, an eviction). The worker
# itself is started through exec (worker.sh), never by this script: a pod holds no secret of the
# pool's in its spec.
# $1: the pod's state directory (made here, 0700); $2: seconds to wait for a first worker.
set -u
state=$1
first=$2
trap 'exit 0' TERM INT
umask 077
mkdir -p "$state" || exit 90
i=0
while :; do
  [ -e "$state/end" ] && exit 0
  if [ ! -e "$state/started" ] && [ "$i" -ge "$first" ]; then
    echo "sky: no worker came within $first s; the pod ends" >&2
    exit 0
  fi
  sleep 1 &
  wait $!
  i=$((i + 1))
done
