# shellcheck shell=bash
# sky bootstrap: the steps every image runs, phase by phase (idempotent: safe to run again).
# What the image asks for comes in the variables set above this text (Image::bootstrap writes
# them: readable words and quoted here-documents, no secret on any command line):
#   sky_phase_mark  the mark a phase line starts with
#   sky_apt         Debian packages ("name" or "name=version")
#   sky_python      the python to make the venv with ("" when the image has no Python)
#   sky_pip_requirements   pip requirements, one a line ("" when none)
#   sky_pip_extra_index_url   pip's extra index URL, without credentials ("" when none)
#   sky_pip_netrc   a netrc entry with that URL's credentials, in base64 ("" when none)
#   sky_env         the lines env.sh exports (Image::env, each value quoted)
#   sky_file_path, sky_file_mode, sky_file_data   files to write (content in base64)
#   sky_setup       the image's setup commands, one a line
#   sky_ttl         the node's hard lifetime in seconds (0: none)
# shellcheck disable=SC2154  # every sky_* variable is set by the lines above this text
set -euo pipefail
# Everything this script creates is the pool user's alone (env.sh holds Image::env, which may
# carry secrets) unless a step below widens it on purpose.
umask 077
export DEBIAN_FRONTEND=noninteractive
SKY_HOME=${SKY_HOME:-/opt/sky}
mkdir -p "$SKY_HOME"
chmod 700 "$SKY_HOME"
phase() { echo "$sky_phase_mark $1"; }
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

if [ ${#sky_apt[@]} -gt 0 ]; then
  phase apt
  missing=()
  for p in "${sky_apt[@]}"; do
    dpkg-query -W -f='${Status}' "${p%%=*}" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  # apt and the packages' maintainer scripts expect the usual umask (lists and files they
  # create must stay readable by other users and services).
  if [ ${#missing[@]} -gt 0 ]; then
    (
      umask 022
      $SUDO apt-get update -qq
      $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
    )
  fi
fi

if [ -n "$sky_python" ]; then
  phase python
  PY=$(command -v "$sky_python" || command -v python3)
  [ -x "$SKY_HOME/venv/bin/python" ] || "$PY" -m venv "$SKY_HOME/venv"
  if [ -n "$sky_pip_requirements" ]; then
    phase pip
    # The requirements and the index URL's credentials reach pip through private files, the
    # URL through its environment, never its argument list; written with builtins, removed
    # when pip is done or the script fails.
    pip_dir=$(mktemp -d "$SKY_HOME/pip.XXXXXX")
    trap 'rm -rf "$pip_dir"' EXIT
    printf '%s\n' "$sky_pip_requirements" > "$pip_dir/requirements.txt"
    (
      if [ -n "$sky_pip_extra_index_url" ]; then
        export PIP_EXTRA_INDEX_URL="$sky_pip_extra_index_url"
      fi
      if [ -n "$sky_pip_netrc" ]; then
        # The user's own entries first, so they still count.
        {
          cat "$HOME/.netrc" 2>/dev/null || true
          echo
          base64 -d <<< "$sky_pip_netrc"
        } > "$pip_dir/netrc"
        export NETRC="$pip_dir/netrc"
      fi
      "$SKY_HOME/venv/bin/python" -m pip install -q -r "$pip_dir/requirements.txt"
    )
    rm -rf "$pip_dir"
    trap - EXIT
  fi
fi

phase env
# Written aside and renamed: nodes bootstrapping at once never read half a file. mktemp creates
# it 0600, exclusively: it never reuses or follows what is already there.
env_tmp=$(mktemp "$SKY_HOME/env.sh.XXXXXX")
chmod 600 "$env_tmp"
if [ -n "$sky_python" ]; then
  # The image's venv is active for whatever sources env.sh (the worker, setup commands): its
  # python3 and pip come first on PATH. The image's env below may still set either.
  # shellcheck disable=SC2016  # $PATH is for env.sh to expand, when it is sourced
  printf 'export VIRTUAL_ENV=%q\nexport PATH=%q/bin:"$PATH"\nunset PYTHONHOME\n' \
    "$SKY_HOME/venv" "$SKY_HOME/venv" >> "$env_tmp"
fi
[ -z "$sky_env" ] || printf '%s\n' "$sky_env" >> "$env_tmp"
mv -f "$env_tmp" "$SKY_HOME/env.sh"

if [ ${#sky_file_path[@]} -gt 0 ]; then
  phase files
  # Each file is written into a fresh temporary file beside it (mktemp: 0600, created
  # exclusively, so the content is never readable by others on the way and nothing already
  # there is reused or followed), given its mode, then renamed over the path (rename replaces a
  # symlink, never writes through it), in a directory nobody else can change.
  sky_put() {
    local dir tmp why
    dir=$(dirname "$1")
    (umask 022; $SUDO mkdir -p "$dir")
    if ! why=$(sky_dir_is_ours "$dir"); then
      echo "sky: refusing to write $1: $why" >&2
      return 1
    fi
    tmp=$($SUDO mktemp "$dir/.sky-file.XXXXXX")
    if ! base64 -d <<< "$3" | $SUDO tee "$tmp" > /dev/null ||
       ! $SUDO chmod "$2" "$tmp" || ! $SUDO mv -f -T "$tmp" "$1"; then
      $SUDO rm -f "$tmp"
      return 1
    fi
  }
  for k in "${!sky_file_path[@]}"; do
    sky_put "${sky_file_path[$k]}" "${sky_file_mode[$k]}" "${sky_file_data[$k]}"
  done
fi

if [ -n "$sky_setup" ]; then
  phase setup
  # The user's own commands run with the usual umask, as in a login shell.
  (
    umask 022
    # shellcheck disable=SC1091  # written by the env phase above
    . "$SKY_HOME/env.sh"
    eval "$sky_setup"
  )
fi

if [ "$sky_ttl" -gt 0 ]; then
  phase ttl
  echo $(( $(date +%s) + sky_ttl )) > "$SKY_HOME/deadline"
fi
phase "done"
