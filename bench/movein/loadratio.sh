#!/usr/bin/env bash
# bench/movein/loadratio.sh RB_PORT BF_PORT [RUNS]: alternates RedisBloom's own pipelined
# BF.MADD (redis-cli --pipe of 1000 commands of 1000 items each) with `bfserver load` of the
# same 1M items (default --method build) into a durable bfserver; one line per run:
# RedisBloom items/s, bfserver load items/s, their ratio. BFS names the bfserver binary.
set -euo pipefail
rb=$1; bf=$2; n=${3:-11}; bfs=${BFS:-bfserver}; dir=${TMPDIR:-/tmp}/bfserver-loadratio
mkdir -p "$dir"
if [ ! -s "$dir/items.txt" ]; then
  seq 1 1000000 | sed 's/^/item-/' > "$dir/items.txt"
  /usr/bin/python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
def resp(args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a.encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)
items = [l.rstrip('\n') for l in open(d + '/items.txt')]
with open(d + '/madd.resp', 'wb') as f:
    f.write(resp(['DEL', 'bench']))
    f.write(resp(['BF.RESERVE', 'bench', '0.01', '1000000']))
    for i in range(0, len(items), 1000):
        f.write(resp(['BF.MADD', 'bench'] + items[i:i + 1000]))
PY
fi
for i in $(seq "$n"); do
  s=$(date +%s%N); redis-cli -p "$rb" --pipe < "$dir/madd.resp" >/dev/null; e=$(date +%s%N)
  a=$(( 1000000 * 1000000000 / (e - s) ))
  b=$("$bfs" load --to "redis://127.0.0.1:$bf" --key bench --error-rate 0.01 --capacity 1000000 \
      --file "$dir/items.txt" --progress log 2>/dev/null | grep -o '([0-9]* items/s)' | tr -d '(' | cut -d' ' -f1)
  echo "$a $b $(echo "scale=2; $b/$a" | bc)"
done
