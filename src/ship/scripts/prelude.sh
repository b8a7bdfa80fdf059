# shellcheck shell=bash
# sky ship: what every shipping command starts with. The node's program store is $HOME/.sky/cas
# (private to the user), and sky_sha prints the SHA-256 of its standard input (openssl where the
# node has it, else coreutils' sha256sum).
umask 077
sky="$HOME/.sky"
cas="$sky/cas"
mkdir -p "$cas" "$sky/prog" && chmod 700 "$sky" || exit 90
if command -v openssl >/dev/null 2>&1; then
  sky_sha() { openssl dgst -sha256 -r | cut -c1-64; }
else
  sky_sha() { sha256sum | cut -c1-64; }
fi
