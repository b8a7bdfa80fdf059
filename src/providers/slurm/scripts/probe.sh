#!/bin/bash
# On every node of the job, before the program is placed: the node's facts, one line
#   MARK <name> <arch> <glibc|-> <nonce|-> <cached|-> <home>
# where nonce is what the login node wrote into NONCE_FILE (the same text: the node sees the
# login node's files, a shared home) and cached says the node's own store has the program.
#   probe.sh MARK NONCE_FILE PROGRAM_ID
set -u
mark=$1 nonce_file=$2 id=$3
n=${SLURMD_NODENAME:-$(hostname -s)}
a=$(uname -m)
g=$( (ldd --version 2>&1 || true) | head -n1 | grep -oE '[0-9]+\.[0-9]+$')
s=$(cat "$nonce_file" 2>/dev/null || echo -)
c=-
[ -f "$HOME/.sky/prog/$id/.complete" ] && c=cached
echo "$mark $n $a ${g:--} $s $c $HOME"
