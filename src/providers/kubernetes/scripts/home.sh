#!/bin/sh
# Where sky keeps its files in a pod: prints the user, then $HOME where $HOME/.sky can be made
# and written, else "private" and a fresh 0700 directory under /tmp (mktemp -d: a name no other
# user can take first), for images that run as a random user with no writable home. POSIX sh:
# the image may have no bash.
id -un 2>/dev/null || id -u
h=${HOME:-/}
if [ "$h" != / ] && mkdir -p "$h/.sky" 2>/dev/null && [ -w "$h/.sky" ]; then
  echo "$h"
else
  echo private
  mktemp -d /tmp/sky-home.XXXXXX
fi
