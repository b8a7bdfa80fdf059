# shellcheck shell=bash
# On every node of the job, after sbcast: puts the program's archive into this user's store
# ($HOME/.sky/prog/<id>). The archive is read only from the pool's private directory (made by
# incoming.sh, checked again here), copied to a private file, and only that copy is hashed and,
# if its SHA-256 is the one the login node computed, unpacked. The private directory is removed
# whatever happens.
#   unpack.sh <private directory> <program id> <sha256 of the archive>
# The marks it prints (sky_refused_mark, sky_placed_mark) are set above this text.
# shellcheck disable=SC2154  # the marks are set by the lines above this text
set -u
umask 077
dir=$1 id=$2 sum=$3
node=${SLURMD_NODENAME:-$(hostname -s)}
store="$HOME/.sky/prog"
dest="$store/$id"
refuse() {
  echo "$sky_refused_mark $node $1"
  rm -rf -- "$dir" "${copy:-}" 2>/dev/null
  exit 92
}
private() {
  [ ! -L "$1" ] && [ -d "$1" ] && [ "$(stat -c '%u %a' -- "$1")" = "$(id -u) 700" ]
}
if [ ! -f "$dest/.complete" ]; then
  { mkdir -p "$store" && chmod 700 "$HOME/.sky" "$store"; } || refuse "cannot make $store"
  private "$dir" || refuse "$dir is not this user's private directory"
  tar_file="$dir/program.tar"
  if [ -L "$tar_file" ] || [ ! -f "$tar_file" ] || [ "$(stat -c %u -- "$tar_file")" != "$(id -u)" ]; then
    refuse "$tar_file is not this user's file"
  fi
  copy=$(mktemp "$store/.incoming-XXXXXXXX") || refuse "cannot make a private file in $store"
  cat -- "$tar_file" >"$copy" || refuse "cannot copy $tar_file"
  got=$(sha256sum <"$copy" | cut -d' ' -f1)
  [ "$got" = "$sum" ] || refuse "the archive sbcast wrote is not the program (SHA-256 $got, expected $sum)"
  x="$dest.tmp-$$"
  rm -rf -- "$x"
  if mkdir -p -- "$x" && tar -xf "$copy" -C "$x"; then
    mv -T -- "$x" "$dest" 2>/dev/null || rm -rf -- "$x"
  else
    rm -rf -- "$x"
  fi
  rm -f -- "$copy"
fi
rm -rf -- "$dir"
[ -f "$dest/.complete" ] && echo "$sky_placed_mark $node"
