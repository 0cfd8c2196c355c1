package memtune

import (
	"bufio"
	"context"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Why the heap on huge pages (Options.HugeHeap): the Go runtime asks for
// none (Go 1.26 maps its heap 4 MiB at a time and advises none of it),
// and where the kernel's THP mode is "madvise", as on Debian
// and this project's machines, the heap is then 4 KiB pages. The first
// write to each costs a fault: 11 µs on a VM measured here, and creating
// a million small filters took 112,000 of them, a fifth of the node's
// CPU, most on the state machine's goroutine; the collector's marking of
// a million entries misses the TLB on nearly every one. With the kernel's
// mode set to "always" the same run took 2,700 faults and a fifth less
// CPU (docs/BENCHMARKS.md, "The heap on huge pages").
//
// The heap grows into address space the runtime maps as it goes, so
// hugeHeap watches the memory the runtime holds and, when it grows,
// advises the new mappings near the heap (MADV_HUGEPAGE), so that faults
// from then on take a 2 MiB page, and collapses what was touched before
// the advice (MADV_COLLAPSE, Linux 6.1), so that the rest of that 2 MiB
// does not fault 4 KiB at a time. Both are hints: any error leaves the
// pages as they were; a kernel without huge pages (EINVAL) ends the
// watch.
//
// The cost is memory: a 2 MiB page is held whole while any of it is in
// use, and the kernel's khugepaged may collapse again what the runtime
// gave back. So it is off unless asked for.
func hugeHeap(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		poll = 2 * time.Millisecond
	}
	// The heap's neighbourhood: its arenas grow from a hint near any heap
	// object; C's malloc and thread stacks are mapped far from it.
	near := uintptr(unsafe.Pointer(unsafe.SliceData(make([]byte, 128<<10)))) // past what the compiler puts on a stack
	lo, hi := near-min(near, heapReach), near+heapReach
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	advised := map[uintptr]uintptr{}
	var last uint64
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[0].Value.Uint64() == last {
			continue
		}
		last = sample[0].Value.Uint64()
		if len(advised) > maxAdvised {
			clear(advised)
		}
		ok := heapMappings(lo, hi, func(a, b uintptr) bool {
			if advised[a] == b {
				return true
			}
			if err := madvise(a, b-a, syscall.MADV_HUGEPAGE); err == syscall.EINVAL {
				return false
			} else if err != nil {
				return true // gone or changed since the list was read: the next growth looks again
			}
			// Best effort: a kernel before 6.1 refuses it, and a range
			// it cannot collapse now stays as it is.
			_ = madvise(a, b-a, madvCollapse)
			advised[a] = b
			return true
		})
		if !ok {
			return
		}
	}
}

const (
	// heapReach bounds how far from a heap object a mapping counts as the
	// heap's: 256 GiB either way.
	heapReach = 1 << 38
	// maxAdvised bounds the mappings remembered as advised; past it they
	// are forgotten, and advised again as they change.
	maxAdvised = 4096
	// madvCollapse is MADV_COLLAPSE, which package syscall lacks.
	madvCollapse = 25
)

// heapMappings calls f with each private, writable, anonymous mapping of
// at least a huge page inside [lo, hi), from /proc/self/maps, until f
// returns false; it reports whether f never did.
func heapMappings(lo, hi uintptr, f func(a, b uintptr) bool) bool {
	file, err := os.Open("/proc/self/maps")
	if err != nil {
		return false
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		// "start-end perms offset dev inode [path]": anonymous ones have
		// inode 0 and no path.
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 || fs[1] != "rw-p" || fs[4] != "0" {
			continue
		}
		s, e, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(s, 16, 64)
		b, err2 := strconv.ParseUint(e, 16, 64)
		if err1 != nil || err2 != nil || uintptr(a) < lo || uintptr(b) > hi || b-a < 2<<20 {
			continue
		}
		if !f(uintptr(a), uintptr(b)) {
			return false
		}
	}
	return true
}

func madvise(a, n uintptr, advice int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, a, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
