#!/usr/bin/env bash
# Hot-path A/B/C throughput in one run: an earlier bfserver build (OLD), this
# build (NEW) and RedisBloom with matched durability (AOF, appendfsync
# always), driven by redis-benchmark (50 clients) with BF.EXISTS and BF.ADD
# at pipeline depths 1 and 32, every server in every round, in turn.
#
#   bench/hotpath/run.sh OLD-BINARY NEW-BINARY [ROUNDS]
#
# Prints "round command depth server requests/s"; compare medians. The
# servers listen on 127.0.0.1:7401-7421. Every case sends random items
# (-r): without it redis-benchmark sends key:__rand_int__ as it is, one
# item over and over, whose bits stay in the cache (figures before 2026-12
# were taken so).
set -u
old=$1 new=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
start_rb=${REDISBLOOM:-$here/../shared/anchors/start-redisbloom}
da=$(mktemp -d) db=$(mktemp -d)
"$old" --addr 127.0.0.1:7401 --raft-addr 127.0.0.1:7402 --data-dir "$da" >/dev/null 2>&1 & A=$!
"$new" --addr 127.0.0.1:7411 --raft-addr 127.0.0.1:7412 --data-dir "$db" >/dev/null 2>&1 & B=$!
R=$("$start_rb" 7421 --appendonly yes --appendfsync always 2>/dev/null)
trap 'kill $A $B $R 2>/dev/null; wait $A $B 2>/dev/null; rm -rf "$da" "$db"' EXIT
for p in 7401 7411 7421; do
  until redis-cli -p $p BF.RESERVE f 0.01 10000000 >/dev/null 2>&1; do sleep 0.1; done # polling readiness
  redis-cli -p $p BF.ADD f x >/dev/null
done
# CASES="EXISTS 32 2000000" (command depth requests; several separated by
# ";") runs only those. The command AUTO is BF.ADD to random new keys, each
# add creating a filter (as BF.ADD tenant:N x does): every round adds that
# many keys to each server, so later rounds run on more filters.
IFS=';' read -r -a CASES <<< "${CASES:-EXISTS 1 200000;EXISTS 32 2000000;ADD 1 100000;ADD 32 1000000}"
name() { case $1 in 7401) echo old;; 7411) echo new;; 7421) echo redisbloom;; esac; }
run() { # port command pipeline requests [redis-benchmark options]
  redis-benchmark -p "$1" -c 50 -n "$4" -P "$3" -q --csv ${5:-} $2 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}
for round in $(seq "$rounds"); do
  for cs in "${CASES[@]}"; do
    set -- $cs
    # The order rotates each round, so that no server always runs first.
    case $((round % 3)) in 1) order="7401 7411 7421";; 2) order="7411 7421 7401";; 0) order="7421 7401 7411";; esac
    for p in $order; do
      if [ "$1" = AUTO ]; then
        echo "$round BF.AUTO P$2 $(name $p) $(run $p "BF.ADD tenant:__rand_int__ x" "$2" "$3" "-r 100000000")"
      else
        echo "$round BF.$1 P$2 $(name $p) $(run $p "BF.$1 f key:__rand_int__" "$2" "$3" "-r 100000000")"
      fi
    done
  done
done
