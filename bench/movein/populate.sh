#!/usr/bin/env bash
# bench/movein/populate.sh PORT: fills the server on PORT with 100 filters of various sizes
# (60 Bloom, 40 Cuckoo), an empty and an emptied Cuckoo filter, a 64 MiB Cuckoo filter,
# one 188.6 MiB Bloom filter (100M items at 0.1%), TTLs on every 5th key, and strings.
set -euo pipefail
port=$1; bfs=${BFS:-bfserver}; url=redis://127.0.0.1:$port
r() { redis-cli -p $port "$@" >/dev/null; }
for i in $(seq 0 59); do
  cap=$(( 1000 << (i % 11) ))                 # 1k .. 1M
  fill=$(( cap * (50 + (i * 37) % 150) / 100 )) # 50% .. 200% of capacity: some grow
  err=$([ $((i % 3)) = 0 ] && echo 0.001 || echo 0.01)
  method=$([ $((i % 4)) = 0 ] && echo madd || echo build)
  seq 1 $fill | sed "s/^/bf$i-/" | $bfs load --to $url --key "bloom:$i" --error-rate $err --capacity $cap \
    --expansion $(( 1 + i % 4 )) --method $method --progress log 2>/dev/null >/dev/null
done
for i in $(seq 0 39); do
  cap=$(( 1000 << (i % 10) ))
  fill=$(( cap * (40 + (i * 53) % 120) / 100 ))
  bs=$(( 1 + i % 4 ))
  seq 1 $fill | sed "s/^/cf$i-/" | $bfs load --to $url --key "cuckoo:$i" --cuckoo --capacity $cap --bucket-size $bs \
    --progress log 2>/dev/null >/dev/null
  if [ $((i % 3)) = 0 ]; then  # some deletes
    for j in $(seq 1 7 200); do echo "CF.DEL cuckoo:$i cf$i-$j"; done | redis-cli -p $port >/dev/null
  fi
done
r CF.RESERVE cuckoo:empty 5000
r CF.RESERVE cuckoo:emptied 64 EXPANSION 1
for j in $(seq 1 300); do echo "CF.ADD cuckoo:emptied e$j"; done | redis-cli -p $port >/dev/null
for j in $(seq 1 300); do echo "CF.DEL cuckoo:emptied e$j"; done | redis-cli -p $port >/dev/null
# The big one: 100M at 0.1%, scaling (its first link at 0.05%): 188.6 MiB; 2M items in it.
seq 1 2000000 | sed 's/^/user/' | $bfs load --to $url --key users:signup --error-rate 0.001 --capacity 100000000 --progress log 2>/dev/null >/dev/null
# A 64 MiB Cuckoo filter (4 chunks).
seq 1 1000000 | sed 's/^/ev/' | $bfs load --to $url --key events:dedup --cuckoo --capacity 60000000 --bucket-size 2 --progress log 2>/dev/null >/dev/null
i=0
for k in $(redis-cli -p $port --scan); do
  i=$((i + 1))
  [ $((i % 5)) = 0 ] && r PEXPIRE "$k" $(( 3600000 + i * 60000 ))
done
for j in $(seq 1 50); do r SET "session:$j" "not a filter"; done
r -n 2 BF.ADD db2:bloom x
r -n 2 SET db2:string y
