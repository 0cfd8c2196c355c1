#!/usr/bin/env bash
# Auto-create throughput in one run: BF.ADD to random new keys (each add
# creates a filter, as BF.ADD tenant:N x does), 50 clients at pipeline
# depth 32, for an earlier bfserver build (OLD), this build (NEW) and
# RedisBloom with matched durability (AOF, appendfsync always). Each round
# adds N more keys to every server, so later rounds run on more filters.
#
#   bench/hotpath/autocreate.sh OLD-BINARY NEW-BINARY [ROUNDS] [N]
#
# Prints "round server requests/s". The servers listen on 127.0.0.1:7401-7421.
set -u
old=$1 new=$2 rounds=${3:-2} n=${4:-150000}
here=$(cd "$(dirname "$0")/../.." && pwd)
start_rb=${REDISBLOOM:-$here/../shared/anchors/start-redisbloom}
da=$(mktemp -d) db=$(mktemp -d)
"$old" --addr 127.0.0.1:7401 --raft-addr 127.0.0.1:7402 --data-dir "$da" >/dev/null 2>&1 & A=$!
"$new" --addr 127.0.0.1:7411 --raft-addr 127.0.0.1:7412 --data-dir "$db" >/dev/null 2>&1 & B=$!
R=$("$start_rb" 7421 --appendonly yes --appendfsync always 2>/dev/null)
trap 'kill $A $B $R 2>/dev/null; wait $A $B 2>/dev/null; rm -rf "$da" "$db"' EXIT
for p in 7401 7411 7421; do
  until redis-cli -p $p PING >/dev/null 2>&1; do sleep 0.1; done # polling readiness
done
name() { case $1 in 7401) echo old;; 7411) echo new;; 7421) echo redisbloom;; esac; }
for round in $(seq "$rounds"); do
  for p in 7401 7411 7421; do
    echo "$round $(name $p) $(redis-benchmark -p $p -c 50 -n "$n" -P 32 -r 100000000 -q --csv BF.ADD tenant:__rand_int__ x 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')"
  done
done
