# shellcheck shell=bash
# sky ship: starts the node's peer file server (the program's --sky-serve-files mode) and prints
# its port. Standard input: the token, then the SHA-256 of each file it may serve. It listens
# only on the address the pool's peers use, counts only requests with the token as activity, and
# ends with the pool: when its run directory goes, or after `life` seconds.
# Set above this text: run (the pool's run directory), addr, life, lib (the program's library
# directory), exe (the program); prelude.sh: cas.
# shellcheck disable=SC2154  # run, addr, life, lib, exe and cas are set by the lines above this text
cd "$run" || exit 1
rm -f serve-port
IFS= read -r t
printf '%s\n' "$t" > serve-token
cat > serve-list
SKY_SERVE_DIR="$cas" SKY_SERVE_TOKEN_FILE="$run/serve-token" \
  SKY_SERVE_LIST_FILE="$run/serve-list" SKY_SERVE_PORT_FILE="$run/serve-port" \
  SKY_SERVE_ADDR="$addr" SKY_SERVE_RUN_DIR="$run" SKY_SERVE_LIFETIME="$life" \
  SKY_SERVE_IDLE=120 LD_LIBRARY_PATH="$lib" setsid "$exe" --sky-serve-files > serve.log 2>&1 \
  < /dev/null &
echo $! > serve.pid
for _ in $(seq 100); do
  [ -s serve-port ] && cat serve-port && exit 0
  kill -0 "$(cat serve.pid)" 2>/dev/null || break
  sleep 0.05
done
tail -n 5 serve.log
exit 1
