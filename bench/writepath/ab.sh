#!/usr/bin/env bash
# Server CPU a request of BF.ADD at pipeline depth 1 (50 clients), for
# bfserver builds taken in turn, each round a fresh node with a fresh data
# directory (issue #25, docs/BENCHMARKS.md "The write path per request").
#
#   bench/writepath/ab.sh ROUNDS FSYNC BINARY...    # FSYNC: always, everysec, no
#
# Prints "build round rps cpu_us": cpu_us is the server's user+system CPU
# (/proc/PID/stat) over the run divided by its requests. Compare medians,
# and per-round ratios: the machine's load moves both. PORT (default 7810,
# and PORT+1 for Raft), N (requests, default 200000) and R (redis-benchmark
# -r; default 0 sends the item __rand_int__ itself every time, as the
# figures of 2026-12-05 were taken) may be set.
set -u
rounds=$1 fsync=$2
shift 2
port=${PORT:-7810} n=${N:-200000}
hz=$(getconf CLK_TCK)
rand=()
if [ "${R:-0}" != 0 ]; then rand=(-r "$R"); fi
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    dir=$(mktemp -d)
    "$bin" --addr 127.0.0.1:$port --raft-addr 127.0.0.1:$((port + 1)) --data-dir "$dir" --fsync "$fsync" \
      --max-filter-bytes 4294967296 >/dev/null 2>&1 &
    pid=$!
    until redis-cli -p $port BF.ADD bf x >/dev/null 2>&1; do sleep 0.1; done # polling readiness
    t0=$(cpu $pid)
    rps=$(redis-benchmark -p $port -c 50 -P 1 -n "$n" "${rand[@]}" -q --csv BF.ADD bf __rand_int__ 2>/dev/null |
      tail -1 | cut -d, -f2 | tr -d '"')
    t1=$(cpu $pid)
    awk -v b="$(basename "$bin")" -v r="$round" -v rps="$rps" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v n="$n" \
      'BEGIN { printf "%s %d %s %.2f\n", b, r, rps, (t1 - t0) * 1e6 / hz / n }'
    kill $pid
    wait $pid 2>/dev/null
    rm -rf "$dir"
  done
done
