# shellcheck shell=bash
# sky ship: the program directory, as hard links into the store (copies where links are
# refused), made in a private directory and renamed into place, so nobody sees half of it.
# Standard input: "HASH<TAB>name" per file.
# Set above this text: prog (the program directory); prelude.sh: cas.
# shellcheck disable=SC2154  # prog and cas are set by the lines above this text
[ -f "$prog/.complete" ] && exit 0
tmp="$prog.tmp-$$"
rm -rf "$tmp"
mkdir -p "$tmp/lib" || exit 1
while IFS=$'\t' read -r h name; do
  ln "$cas/$h" "$tmp/$name" 2>/dev/null || cp -p "$cas/$h" "$tmp/$name" ||
    { echo "missing $h" >&2; rm -rf "$tmp"; exit 3; }
done
touch "$tmp/.complete"
mv -T "$tmp" "$prog" 2>/dev/null || rm -rf "$tmp"
test -f "$prog/.complete"
