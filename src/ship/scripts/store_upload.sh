# shellcheck shell=bash
# sky ship: one uploaded file into the store. It is decompressed (when it came compressed), then
# its content is checked against its hash before it enters the store under that name. The client
# names the file in its error: no name of the client's is in this script.
# Set above this text: in (where the file is assembled), h (its SHA-256), sent (where the upload
# landed: the .zst beside it when compressed, else the same path), zstd (1 when compressed);
# prelude.sh: cas, sky_sha.
# shellcheck disable=SC2154  # in, h, sent, zstd and cas are set by the lines above this text
if [ "$zstd" = 1 ]; then
  got=$(zstd -dqc "$sent" | tee "$in" | sky_sha)
  rm -f "$sent"
else
  got=$(sky_sha < "$in")
fi
if [ "$got" = "$h" ]; then
  chmod 500 "$in" && mv -f "$in" "$cas/$h"
else
  rm -f "$in"
  echo "sky: the file arrived damaged (hash mismatch)" >&2
  exit 3
fi
