# shellcheck shell=bash
# sky ship: takes stock of the node's program store. Standard input: one line per file of the
# program, "sha256<TAB>size<TAB>path on the client". Prints "zstd" when the node can decompress,
# "complete" (and stops) when the program directory is already whole, then per file not in the
# store "local HASH" when the node's own system holds the same bytes at the same path (copied into
# the store), else "need HASH".
# Set above this text: prog (the program directory); prelude.sh: cas, sky_sha.
# shellcheck disable=SC2154  # prog and cas are set by the lines above this text
#
# What enters the store is the copy, and only when the copy's own bytes hash to the name:
# whoever can write the path on the node may swap the file between any look at it and the copy
# (hashing the path, then copying it, would store their file under the genuine hash). The hash
# of the path is a cheap filter.
command -v zstd >/dev/null 2>&1 && echo zstd
[ -f "$prog/.complete" ] && { echo complete; exit 0; }
H=()
P=()
while IFS=$'\t' read -r h _size path; do
  [ -f "$cas/$h" ] && continue
  H+=("$h")
  P+=("$path")
done
# One hashing process for every candidate the node's system has.
E=()
for p in "${P[@]}"; do [ -f "$p" ] && E+=("$p"); done
declare -A S
if [ ${#E[@]} -gt 0 ]; then
  if command -v openssl >/dev/null 2>&1; then
    out=$(openssl dgst -sha256 -r -- "${E[@]}" 2>/dev/null)
  else
    out=$(sha256sum -- "${E[@]}" 2>/dev/null)
  fi
  while IFS= read -r l; do S["${l:66}"]="${l:0:64}"; done <<< "$out"
fi
for i in "${!H[@]}"; do
  h=${H[i]}
  p=${P[i]}
  if [ "${S[$p]:-}" = "$h" ] && t=$(mktemp "$cas/.in-XXXXXXXXXX"); then
    if cp -- "$p" "$t" && [ "$(sky_sha < "$t")" = "$h" ] && chmod 500 "$t" &&
      mv -f -- "$t" "$cas/$h"; then
      echo "local $h"
      continue
    fi
    rm -f "$t"
  fi
  echo "need $h"
done
