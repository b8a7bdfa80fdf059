# shellcheck shell=bash
# sky Local: which of the image's apt packages this machine lacks (Local installs none: it is
# your machine). Prints "$no_dpkg_mark" where there is no dpkg-query to ask, else
# "$missing_mark PACKAGE" per package not installed.
# Set above this text: packages (the names, without versions), no_dpkg_mark, missing_mark.
# shellcheck disable=SC2154  # the variables are set by the lines above this text
command -v dpkg-query > /dev/null || { echo "$no_dpkg_mark"; exit 0; }
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    echo "$missing_mark $p"
done
