#!/usr/bin/env bash
# Fuzzes sky's parsers with libFuzzer (docs/fuzzing.md): builds the targets of tests/fuzz with
# clang-14, ASan and UBSan in build-fuzz/ ($SKY_FUZZ_BUILD_DIR), runs each for
# ${SKY_FUZZ_SECONDS:-60} seconds on its corpus, merges what found new coverage into
# tests/fuzz/corpus/<target>/ and copies every crash into tests/fuzz/regressions/<target>/ (both
# replayed by ctest, label fuzz). Arguments: target names (default: all). Exit status 1 when a
# target found something.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SKY_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${SKY_FUZZ_SECONDS:-60}
keep=${SKY_FUZZ_CORPUS_MAX:-40}  # inputs kept per target besides the seeds
all=(frames args xml ec2_responses rest_json known_hosts accelerator)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

"$root/scripts/install-deps.sh"
missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "sky: installing missing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # The library too is compiled with coverage and sanitizers, so the fuzzer sees inside it.
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSKY_FUZZ=ON -DSKY_BUILD_BENCH=OFF -DSKY_BUILD_EXAMPLES=OFF "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    >/dev/null
fi
cmake --build "$build" --target "${targets[@]/#/sky_fuzz_}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
found=0
summary=()
for t in "${targets[@]}"; do
  corpus=$root/tests/fuzz/corpus/$t
  mkdir -p "$corpus" "$work/$t/new" "$work/$t/min" "$work/$t/artifacts"
  log=$work/$t/log
  echo "== $t: ${seconds}s"
  # New inputs go to the first directory; the corpus is read as well.
  "$build/tests/fuzz/sky_fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=512 -malloc_limit_mb=256 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" \
    "$work/$t/new" "$corpus" >"$log" 2>&1 || true
  grep -E "^#[0-9]+[[:space:]]+DONE|^==[0-9]+==ERROR|^SUMMARY|FUZZ FINDING" "$log" | tail -4 || true
  # The seeds stay; of the rest, greedily, the inputs that reach the most edges the kept ones do
  # not, up to $keep (libFuzzer's own merge keeps hundreds: every new hit count is a feature).
  "$build/tests/fuzz/sky_fuzz_$t" -merge=1 -merge_control_file="$work/$t/control" \
    -rss_limit_mb=512 -malloc_limit_mb=256 -timeout=10 \
    "$work/$t/min" "$corpus" "$work/$t/new" >"$work/$t/merge.log" 2>&1 || true
  if [ -s "$work/$t/control" ]; then
    python3 - "$work/$t/control" "$keep" >"$work/$t/keep" <<'PY'
import os, sys
lines = open(sys.argv[1]).read().split("\n")
n = int(lines[0])
files = lines[2:2 + n]
cov = {}
for line in lines[2 + n:]:
    if line.startswith("COV "):
        parts = line.split()
        cov[int(parts[1])] = set(parts[2:])
seeds = [i for i, f in enumerate(files) if os.path.basename(f).startswith("seed-")]
covered = set().union(*(cov.get(i, set()) for i in seeds)) if seeds else set()
chosen = []
rest = [i for i in range(n) if i not in seeds and i in cov]
for _ in range(int(sys.argv[2])):
    best = max(rest, key=lambda i: (len(cov[i] - covered), -os.path.getsize(files[i])), default=None)
    if best is None or not (cov[best] - covered):
        break
    chosen.append(best)
    covered |= cov[best]
    rest.remove(best)
for i in seeds + chosen:
    print(files[i])
PY
    if [ -s "$work/$t/keep" ]; then
      mkdir -p "$work/$t/kept"
      while read -r f; do cp "$f" "$work/$t/kept/"; done <"$work/$t/keep"
      find "$corpus" -maxdepth 1 -type f -delete
      cp "$work/$t/kept"/* "$corpus/"
    fi
  fi
  for a in "$work/$t/artifacts"/*; do
    [ -e "$a" ] || continue
    mkdir -p "$root/tests/fuzz/regressions/$t"
    cp "$a" "$root/tests/fuzz/regressions/$t/"
    echo "   finding: tests/fuzz/regressions/$t/$(basename "$a")"
    found=1
  done
  stats=$(grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | tail -1 | tr -s "[:space:]" " " || true)
  summary+=("$(printf '%-14s %s | corpus %s files' "$t" "${stats:-no DONE line (crashed?)}" \
    "$(find "$corpus" -maxdepth 1 -type f | wc -l)")")
done
echo "== summary (${seconds}s each)"
printf '%s\n' "${summary[@]}"
exit "$found"
