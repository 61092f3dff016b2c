#!/usr/bin/env bash
# Does a flood of 1 MiB SETs slow small requests more on the pooled kv_server than on its
# baseline? Each round starts each server in turn (pooled under the soak's 64 MiB budget, then
# baseline) and measures redis-benchmark's GET rate of 4 clients with 1 KiB values, alone and
# while 4 other redis-benchmark clients SET 1 MiB values back to back. Prints each rate and
# the flooded-over-quiet ratio. Needs redis-benchmark (redis-tools) and a release kv_server:
#
#   cargo build --release -p tierpool-bench --bin kv_server
#   tierpool-bench/scripts/floods.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
server=target/release/kv_server
rounds=${1:-2}
command -v redis-benchmark >/dev/null || { echo "floods.sh: redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
test -x "$server" || { echo "floods.sh: build $server first (cargo build --release -p tierpool-bench --bin kv_server)"; exit 1; }

# GET requests/s of 4 clients (1 KiB values, after their SETs), n requests each test.
get_rate() {
  redis-benchmark -p "$1" -c 4 -n "$2" -d 1024 -t set,get -q 2>/dev/null | tr '\r' '\n' \
    | awk '/^GET: [0-9.]+ requests per second/ { print $2 }' | tail -1
}

one() {
  local mode=$1 port=$2; shift 2
  "$server" --addr "127.0.0.1:$port" --mode "$mode" "$@" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  local quiet flooded flood
  quiet=$(get_rate "$port" 200000)
  redis-benchmark -p "$port" -c 4 -n 100000000 -d 1048576 -t set -q >/dev/null 2>&1 &
  flood=$!
  sleep 1
  flooded=$(get_rate "$port" 20000)
  kill "$flood" 2>/dev/null || true
  wait "$flood" 2>/dev/null || true
  kill "$srv"
  wait "$srv" 2>/dev/null || true
  awk -v m="$mode" -v q="$quiet" -v f="$flooded" \
    'BEGIN { printf "%-9s GET 1 KiB: quiet %8.0f/s, flooded %6.0f/s, %.3fx\n", m, q, f, f / q }'
}

for (( r = 1; r <= rounds; r++ )); do
  echo "round $r"
  one pooled $((17000 + r)) --max-in-use $((64 << 20))
  one baseline $((17100 + r))
done
