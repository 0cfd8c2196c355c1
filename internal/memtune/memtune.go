// Package memtune keeps the Go runtime's garbage from costing a node as
// much again as its filters. With the default GOGC of 100 the heap may
// grow to twice what is live before a collection, and a node's live heap
// is mostly its filters: a node holding 1 GiB of filters could sit at
// 2 GiB. After every collection, Run sets GOGC so that the garbage allowed
// is at most Headroom bytes, or a twentieth of the live heap when that is
// more (never more than the default 100), and a soft memory limit a little
// above that, so that the runtime also returns freed pages to the kernel
// promptly instead of keeping them for later. Filter arrays hold no
// pointers, so a collection costs little however large they are: more
// frequent cycles are cheap.
//
// Their headers do hold pointers, and a million small filters are a few
// million objects that every collection scans: with garbage held to 32
// MiB, creating 2M filters (BF.ADD tenant:N x) spent 42% of the node's
// CPU in the collector, 88 collections over a heap of 1.4 GB. So the
// garbage allowed is also at least the heap the collector scans
// (/gc/scan/heap:bytes, divided by ScanShare): its work per byte
// allocated then stays bounded however many filters a node holds (GOGC's
// own premise, applied to the scanned part only). Measured with 1M such
// filters: creation 92k -> 172k/s, server CPU 17.9 -> 8.1 s, peak RSS
// 466 -> 540 MB (475 vs 458 B a key after MEMORY PURGE); a node of few
// large filters scans little and keeps the 32 MiB.
//
// Run also puts the heap on transparent huge pages as it grows, when
// asked (Options.HugeHeap, hugeheap_linux.go): fewer page faults for a
// node that creates small filters by the million.
package memtune

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options configure Run.
type Options struct {
	// Headroom is the garbage the heap may hold beyond what is live before
	// a collection, when that is more than a twentieth of the live heap.
	// Default 32 MiB: with the runtime's own memory and the image's cache
	// a node then stays within its filters' bytes plus 64 MiB.
	Headroom uint64
	// IdleCheck is how often Run looks for garbage no allocation will
	// collect (default 5s), and IdleGC how long it lets the heap go
	// without a collection before it collects anyway (default 10s; the
	// runtime's own comes every two minutes).
	IdleCheck, IdleGC time.Duration
	// HugeHeap puts the heap on transparent huge pages as it grows
	// (hugeheap_linux.go): fewer page faults for a node of many small
	// filters, for memory held in 2 MiB pieces. Default off; bfserver's
	// --huge-heap, on by default, sets it.
	HugeHeap bool
}

// hugeHeapPoll is how often the huge-heap watch looks at a growing heap
// (one that holds still, less often).
const hugeHeapPoll = 2 * time.Millisecond

// Run tunes GOGC after every garbage collection until ctx ends.
func Run(ctx context.Context, o Options) {
	if o.Headroom == 0 {
		o.Headroom = 32 << 20
	}
	if o.IdleCheck <= 0 {
		o.IdleCheck = 5 * time.Second
	}
	if o.IdleGC <= 0 {
		o.IdleGC = 10 * time.Second
	}
	if o.HugeHeap {
		go hugeHeap(ctx, hugeHeapPoll)
	}
	gcs := make(chan struct{}, 1)
	arm(gcs, ctx)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}}
	// The memory limit counts the runtime's memory outside heap objects
	// too (goroutine stacks: 8 KiB and more for each of up to 10,000
	// clients, and metadata): what the total holds beyond the heap's own
	// classes.
	classes := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	idle := time.NewTicker(o.IdleCheck)
	defer idle.Stop()
	var ms runtime.MemStats
	// allow is the garbage allowed at the last collection; lastAlloc the
	// bytes allocated in all by the last idle check.
	allow, lastAlloc := o.Headroom, uint64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			if ctx.Err() != nil {
				return // both were ready: select chose at random
			}
			// A burst (a LOADCHUNK stream, a snapshot) can leave garbage
			// that no later allocation collects: collect it, and give the
			// pages back, once it is worth half the garbage allowed and
			// the node has stopped allocating (while it allocates, the runtime's
			// own collection comes soon: forcing one then only doubled
			// the collections of a node of a million small filters, each
			// a scan of millions of objects, and gave back pages the next
			// allocations faulted in again). What the last collection
			// found live may have died since (a bulk load's entries, once
			// applied), unseen until the next one: with none for IdleGC,
			// collect anyway.
			metrics.Read(sample)
			runtime.ReadMemStats(&ms)
			stale := time.Since(time.Unix(0, int64(ms.LastGC))) > o.IdleGC
			quiet := ms.TotalAlloc < lastAlloc+allow/8
			lastAlloc = ms.TotalAlloc
			if live := sample[0].Value.Uint64(); stale || quiet && (ms.HeapAlloc > live+allow/2 || ms.HeapIdle-ms.HeapReleased > allow/2) {
				debug.FreeOSMemory()
			}
			trimC() // C's free memory is not in the heap's figures: trim it at every check
			continue
		case <-gcs:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			continue
		}
		live := sample[0].Value.Uint64()
		var scan uint64
		if sample[1].Value.Kind() == metrics.KindUint64 {
			scan = sample[1].Value.Uint64()
		}
		allow = max(o.Headroom, scan/ScanShare)
		p := Percent(live, allow)
		debug.SetGCPercent(p)
		// The heap's goal, plus the runtime's memory beside the heap and
		// room for the next burst of allocation: above it the scavenger
		// gives pages back.
		goal := live + live*uint64(p)/100 + nonHeap(classes) + o.Headroom/2
		lowerLimit(goal, classes)
	}
}

// lowerLimit sets the memory limit to goal, maxScavengeStep at a time,
// each step followed by an allocation of this goroutine's own: the
// runtime returns what the process holds above the limit in the first
// allocation that finds it there, so this goroutine pays for it, not the
// state machine or a connection (see maxScavengeStep).
func lowerLimit(goal uint64, classes []metrics.Sample) {
	for range maxSteps {
		metrics.Read(classes)
		m := mapped(classes)
		l := Limit(goal, m)
		debug.SetMemoryLimit(int64(l))
		// A span of its own (past 32 KiB), on the heap (past 64 KiB, the
		// most the compiler puts on the stack): the runtime scavenges here.
		runtime.KeepAlive(make([]byte, 64<<10+1))
		if l == goal {
			return
		}
		metrics.Read(classes)
		if mapped(classes)+maxScavengeStep/2 > m {
			return // the runtime held on to it: the background scavenger goes on
		}
	}
}

// maxSteps bounds lowerLimit's steps (64 of 16 MiB: a gigabyte).
const maxSteps = 64

// maxScavengeStep bounds how far below the memory the process holds a new
// limit goes at once. The runtime returns what the process holds above
// its limit in the allocation that finds it there, all at once: after a
// million filters were created (hundreds of MiB freed, not yet returned),
// the limit set at the next collection made one of the state machine's
// allocations madvise for about 100 ms, and a write wait as long (an
// execution trace of bench/stall). lowerLimit steps down, paying each
// step itself; another goroutine's allocation that comes between pays
// one step at most.
const maxScavengeStep = 16 << 20

// Limit is the memory limit for a goal of goal bytes while the process
// holds mapped: the goal, or maxScavengeStep below mapped if that is more.
func Limit(goal, mapped uint64) uint64 {
	if mapped > maxScavengeStep {
		return max(goal, mapped-maxScavengeStep)
	}
	return goal
}

// mapped is the memory the runtime holds from the kernel, as the memory
// limit counts it: all of it but the heap's released pages, from classes
// as last read.
func mapped(classes []metrics.Sample) uint64 {
	if classes[0].Value.Kind() != metrics.KindUint64 || classes[4].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return classes[0].Value.Uint64() - min(classes[0].Value.Uint64(), classes[4].Value.Uint64())
}

// Release returns freed memory to the kernel: the Go heap's (what
// debug.FreeOSMemory does, after a collection) and C's malloc's, where cgo
// builds allocate Pebble's memtables and cache (malloc_cgo.go). MEMORY
// PURGE, the idle check and the keyspace swaps of a snapshot call it.
func Release() {
	debug.FreeOSMemory()
	trimC()
}

// nonHeap is the runtime's memory outside the heap's object, unused, free
// and released classes: stacks and metadata.
func nonHeap(classes []metrics.Sample) uint64 {
	metrics.Read(classes)
	for _, c := range classes {
		if c.Value.Kind() != metrics.KindUint64 {
			return 0 // a runtime without them
		}
	}
	total := classes[0].Value.Uint64()
	for _, c := range classes[1:] {
		total -= min(total, c.Value.Uint64())
	}
	return total
}

// ScanShare: the garbage allowed is at least the scanned heap divided by
// it (see the package comment); 4 saved a tenth of the collections, 1
// more than half.
const ScanShare = 1

// Percent is the GOGC that lets the heap grow by headroom beyond live, at
// least a twentieth of live and at most 100.
func Percent(live, headroom uint64) int {
	if live == 0 {
		return 100
	}
	p := headroom * 100 / live
	return int(max(5, min(100, p)))
}

// arm sends on ch after the next collection, and again after each one,
// until ctx ends: a finalizer runs once the object it guards is collected.
func arm(ch chan struct{}, ctx context.Context) {
	s := new([16]byte)
	runtime.SetFinalizer(s, func(*[16]byte) {
		if ctx.Err() != nil {
			return
		}
		select {
		case ch <- struct{}{}:
		default:
		}
		arm(ch, ctx)
	})
}
