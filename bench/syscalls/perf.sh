#!/bin/bash
# System calls, context switches and CPU per request of one bfserver
# build, from perf's tracepoints (no strace slowdown): a fresh durable
# node, BF.EXISTS then BF.ADD, 50 clients at depth 1.
#
#   bench/syscalls/perf.sh BIN [LABEL] [PORT] [N]
#
# Needs perf (linux-perf) and redis-benchmark; run as root.
set -eu
BIN=$1; LABEL=${2:-$(basename "$1")}; P=${3:-7411}; N=${4:-100000}
DIR=$(mktemp -d)
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
"$BIN" --addr 127.0.0.1:$P --raft-addr 127.0.0.1:$((P + 10000)) --data-dir "$DIR/data" >"$DIR/log" 2>&1 &
PID=$!
for _ in $(seq 100); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $P bf.reserve bf 0.01 10000000 >/dev/null
EV=syscalls:sys_enter_nanosleep,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_fsync,context-switches,task-clock
for c in "BF.EXISTS bf __rand_int__" "BF.ADD bf __rand_int__"; do
  perf stat -x, -e $EV -p $PID -o "$DIR/stat" &
  SP=$!
  sleep 0.3
  # shellcheck disable=SC2086
  r=$(redis-benchmark -p $P -c 50 -n $N -r 10000000 -q $c 2>&1 | tr '\r' '\n' | grep "requests per second" | tail -1 | sed -E "s/.*: ([0-9.]+) requests per second.*/\1/")
  kill -INT $SP; wait $SP 2>/dev/null || true
  echo -n "$LABEL ${c%% *} rps $r "
  # per request; task-clock (perf gives ms) as µs a request
  grep -v "^#" "$DIR/stat" | grep . | awk -F, -v n=$N '{name=$3; sub("syscalls:sys_enter_","",name); if (name == "task-clock") printf "cpu_us=%.2f ", $1*1000/n; else printf "%s=%.3f ", name, $1/n}'
  echo
done
