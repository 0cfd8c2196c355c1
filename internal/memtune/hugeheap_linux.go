package memtune

import (
	"bufio"
	"context"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Why the heap on huge pages (Options.HugeHeap): the Go runtime asks for
// none (Go 1.26 maps its heap at least 4 MiB at a time and advises none of
// it), and where the kernel's THP mode is "madvise", as on Debian and this
// project's machines, the heap is then 4 KiB pages. The first write to
// each costs a fault: 11 µs on a VM measured here, and creating a million
// small filters took 112,000 of them, a fifth of the node's CPU, most on
// the state machine's goroutine. With the kernel's mode set to "always"
// the same run took 2,700 faults and a fifth less CPU (docs/BENCHMARKS.md,
// "The heap on huge pages").
//
// The heap grows into address space the runtime maps as it goes, so
// hugeHeap watches the memory the runtime holds and, when it grows,
// advises the heap's address ranges it has not advised before
// (MADV_HUGEPAGE): faults there from then on take a 2 MiB page. It then
// collapses those ranges once (MADV_COLLAPSE, Linux 6.1), since the
// runtime has written the first pages of a new mapping by then, and the
// rest of those 2 MiB would otherwise fault 4 KiB at a time. A range is
// advised and collapsed once: collapsing the heap again would refill
// what the runtime's scavenger gave back, each time under the process's
// memory-map lock (why Go itself stopped: golang/go#63334). Both are
// hints: no byte changes, an error leaves the pages as they were, and a
// kernel without huge pages (EINVAL) or without /proc/self/maps ends the
// watch, as huge pages turned off do (thpRefused).
//
// The cost is memory: a 2 MiB page is held whole while any of it is in
// use, a fault may wait for the kernel to compact memory, and khugepaged
// may gather again pages the runtime gave back. Measured, a node's peak
// stayed within the noise and gave a million deleted filters' memory
// back as soon (docs/BENCHMARKS.md).
func hugeHeap(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		poll = 2 * time.Millisecond
	}
	if thpRefused() {
		return
	}
	// The heap's neighbourhood, where the kernel does not name mappings:
	// its arenas grow from a hint near any heap object (on amd64 and arm64
	// with 48-bit addresses, far from C's malloc and thread stacks).
	near := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(make([]byte, 128<<10))))) // past what the compiler puts on a stack
	lo, hi := near-min(near, heapReach), near+heapReach
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	var done ranges
	var last uint64
	// The wait doubles while the heap holds still, up to maxPoll: an idle
	// node wakes ten times a second, not five hundred.
	wait := poll
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 || sample[0].Value.Uint64() == last {
			wait = min(2*wait, max(poll, maxPoll))
			t.Reset(wait)
			continue
		}
		last = sample[0].Value.Uint64()
		wait = poll
		t.Reset(wait)
		ok := heapMappings(lo, hi, func(a, b uint64) bool {
			for _, r := range done.missing(a, b) {
				n := uintptr(r[1] - r[0])
				if err := madvise(uintptr(r[0]), n, syscall.MADV_HUGEPAGE); err == syscall.EINVAL {
					return false
				} else if err != nil {
					continue // gone or changed since the list was read: the next growth looks again
				}
				// Best effort: a kernel before 6.1 refuses it, and a 2 MiB
				// range not yet touched (most of them) is left to fault in
				// whole.
				_ = madvise(uintptr(r[0]), n, madvCollapse)
				done.add(r[0], r[1])
			}
			return true
		})
		if !ok {
			return
		}
	}
}

const (
	// maxPoll is the longest wait between looks at a heap that holds still.
	maxPoll = 100 * time.Millisecond
	// heapReach bounds how far from a heap object an unnamed mapping
	// counts as the heap's: 256 GiB either way.
	heapReach = 1 << 38
	// madvCollapse is MADV_COLLAPSE, which package syscall lacks.
	madvCollapse = 25
	// goHeapName is how the runtime names its heap's mappings (Go 1.25's
	// decoratemappings) where the kernel keeps names (CONFIG_ANON_VMA_NAME).
	goHeapName = "[anon: Go: heap]"
)

// thpRefused reports whether the operator turned huge pages off: for the
// machine (the kernel's mode "never", which MADV_COLLAPSE would not heed)
// or for Go programs (GODEBUG=disablethp=1).
func thpRefused() bool {
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && strings.Contains(string(b), "[never]") {
		return true
	}
	return strings.Contains(","+os.Getenv("GODEBUG")+",", ",disablethp=1,")
}

// heapMappings calls f with each mapping of the Go heap of at least a huge
// page, from /proc/self/maps: named the heap's, or private, writable,
// anonymous and unnamed inside [lo, hi). It stops at the first f that
// returns false, and reports whether there was none and the list was read.
func heapMappings(lo, hi uint64, f func(a, b uint64) bool) bool {
	file, err := os.Open("/proc/self/maps")
	if err != nil {
		return false
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		// "start-end perms offset dev inode [name]": anonymous ones have
		// inode 0.
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || fs[1] != "rw-p" || fs[4] != "0" {
			continue
		}
		named := len(fs) > 5
		if named && strings.Join(fs[5:], " ") != goHeapName {
			continue
		}
		s, e, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(s, 16, 64)
		b, err2 := strconv.ParseUint(e, 16, 64)
		if err1 != nil || err2 != nil || b-a < 2<<20 || !named && (a < lo || b > hi) {
			continue
		}
		if !f(a, b) {
			return false
		}
	}
	return true
}

// ranges is a set of address ranges, sorted and apart: those advised.
// The Go heap never gives address space back, so it only grows.
type ranges [][2]uint64

// missing is the parts of [a, b) that r does not hold.
func (r ranges) missing(a, b uint64) [][2]uint64 {
	var out [][2]uint64
	for _, x := range r {
		if x[1] <= a {
			continue
		}
		if x[0] >= b {
			break
		}
		if x[0] > a {
			out = append(out, [2]uint64{a, x[0]})
		}
		a = max(a, x[1])
		if a >= b {
			return out
		}
	}
	return append(out, [2]uint64{a, b})
}

// add puts [a, b) in r, merging it with the ranges it touches.
func (r *ranges) add(a, b uint64) {
	s := *r
	i := 0
	for i < len(s) && s[i][1] < a {
		i++
	}
	j := i
	for j < len(s) && s[j][0] <= b {
		a, b = min(a, s[j][0]), max(b, s[j][1])
		j++
	}
	*r = slices.Replace(s, i, j, [2]uint64{a, b})
}

func madvise(a, n uintptr, advice int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, a, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
