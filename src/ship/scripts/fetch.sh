# shellcheck shell=bash
# sky ship: fetches files from a peer node's file server (serve.sh) into the store. Standard
# input: the token, then "HASH SIZE" per file. Prints "got HASH SIZE" or "failed HASH" per file,
# or "unreachable" when the peer cannot be reached.
# bash's /dev/tcp is the receiver: it is on every image, and this node cannot run the program
# yet. The token travels in the environment of the transfer, never in an argument. No more than
# the manifest's size of a file is written (a wrong peer cannot fill the disk), and only what
# hashes to the name asked for enters the store.
# Set above this text: addr and port (the peer's file server); prelude.sh: cas, sky_sha.
# shellcheck disable=SC2154  # addr, port and cas are set by the lines above this text
IFS= read -r tok
export SKY_T="$tok"
# shellcheck disable=SC2016  # $0 and $1 are the inner bash's arguments
timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$addr" "$port" 2>/dev/null ||
  { echo unreachable; exit 0; }
while read -r h size; do
  [ -f "$cas/$h" ] && { echo "got $h 0"; continue; }
  t=$(mktemp "$cas/.in-XXXXXXXXXX") || { echo "failed $h"; continue; }
  # shellcheck disable=SC2016  # the inner bash expands its own arguments and environment
  if SKY_H="$h" SKY_S="$size" timeout 1200 bash -c 'exec 3<>"/dev/tcp/$0/$1" &&
      printf "%s %s\n" "$SKY_T" "$SKY_H" >&3 && head -c "$SKY_S" <&3' "$addr" "$port" \
      > "$t" 2>/dev/null && [ "$(sky_sha < "$t")" = "$h" ]; then
    chmod 500 "$t" && mv -f "$t" "$cas/$h" && echo "got $h $(stat -c %s "$cas/$h")"
  else
    rm -f "$t"
    echo "failed $h"
  fi
done
