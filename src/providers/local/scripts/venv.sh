# shellcheck shell=bash
# sky Local: the image's Python environment, made once per image: prints "$python_mark PATH" of
# the interpreter it uses ("$python_missing_mark" first when the version asked for is missing and
# python3 stands in; "$no_python_mark" and status 3 when there is none), then makes the venv
# unless it exists.
# Set above this text: want (the interpreter asked for), venv (its directory), and the marks.
# shellcheck disable=SC2154  # the variables are set by the lines above this text
PY=$(command -v "$want" 2>/dev/null || true)
if [ -z "$PY" ]; then
  echo "$python_missing_mark"
  PY=$(command -v python3 2>/dev/null || true)
fi
[ -n "$PY" ] || { echo "$no_python_mark"; exit 3; }
echo "$python_mark $PY"
[ -x "$venv/bin/python" ] && exit 0
umask 077
"$PY" -m venv "$venv" || { st=$?; rm -rf "$venv"; exit $st; }
