package evloop

import "runtime"

func runtimeProcs() int { return defaultLoops(runtime.GOMAXPROCS(0)) }

// defaultLoops is one loop per P but one: a P is left for what the loops
// hand work to (Raft, the state machine, parked writers, the collector).
// With a loop on every P, every P sits in epoll_wait when the node is
// idle between requests, so the runtime's monitor takes each back every
// 20 µs and wakes threads to run the hand-offs: on two cores, one loop
// served durable BF.ADD at depth 1 with 7–15% less CPU a request and
// with fewer than half the context switches a read (docs/BENCHMARKS.md,
// "One event loop fewer than cores"). Measured on two cores only.
func defaultLoops(procs int) int { return max(1, procs-1) }
