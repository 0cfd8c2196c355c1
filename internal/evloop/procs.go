package evloop

import "runtime"

func runtimeProcs() int { return defaultLoops(runtime.GOMAXPROCS(0)) }

// defaultLoops is one loop per P but one: a P is left for what the loops
// hand work to (Raft, the state machine, parked writers, the collector).
// With a loop on every P, every P sits in epoll_wait when the node is
// idle between requests, so the runtime's monitor takes each back every
// 20 µs and wakes threads to run the hand-offs: on two cores, one loop
// served durable BF.ADD at depth 1 with 15–25% less CPU a request and
// reads at depth 1 with a p99 near RedisBloom's instead of 1.6–2.5 times
// it (docs/BENCHMARKS.md, "One event loop fewer than cores").
func defaultLoops(procs int) int { return max(1, procs-1) }
