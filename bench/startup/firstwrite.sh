#!/bin/bash
# Time from a single node's start to its first PING reply and to its
# first acknowledged write (BF.ADD), on a fresh data directory and again
# after a kill -9 restart on it.
#
#   bench/startup/firstwrite.sh BIN [PORT]
#
# Needs redis-cli.
set -eu
BIN=$1; P=${2:-7821}
DIR=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$DIR"' EXIT
for run in fresh restart; do
  t0=$(date +%s%N)
  "$BIN" --addr 127.0.0.1:$P --raft-addr 127.0.0.1:$((P + 10000)) --data-dir "$DIR/data" >"$DIR/log" 2>&1 &
  PID=$!
  for _ in $(seq 2000); do redis-cli -p $P PING >/dev/null 2>&1 && break; sleep 0.005; done
  t1=$(date +%s%N)
  redis-cli -p $P BF.ADD k "x$run" >/dev/null
  t2=$(date +%s%N)
  echo "$run: first PING $(( (t1 - t0) / 1000000 )) ms, first write $(( (t2 - t0) / 1000000 )) ms"
  kill -9 $PID; wait $PID 2>/dev/null || true
  PID=
done
