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
// advised and collapsed once (heapWatch), and the advice is withdrawn
// 30 s later, when the runtime has used the range. Both are hints: no
// byte changes, and an error leaves the pages as they were. The watch
// runs only where the kernel's mode is "madvise" ("always" does it
// already) and GODEBUG has no disablethp=1; it ends if the mode changes,
// or on a kernel without huge pages (EINVAL) or /proc/self/maps.
//
// The cost is memory: a 2 MiB page is held whole while any of it is in
// use, and a fault in an advised range may wait for the kernel to compact
// memory. In the runs measured (docs/BENCHMARKS.md), one node's peak
// stayed within the noise and a million deleted filters' memory was given
// back as soon, within 90 s; three nodes of a million small filters
// peaked about a tenth higher.
func hugeHeap(ctx context.Context, poll time.Duration) {
	if thpMode() != "madvise" || godebugDisablesTHP() {
		return // "always": the kernel does it already; "never", none or turned off: not wanted
	}
	// The heap's neighbourhood, where the kernel does not name mappings:
	// its arenas grow from a hint near any heap object (on amd64 and arm64
	// with 48-bit addresses, far from C's malloc and thread stacks).
	near := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(make([]byte, 128<<10))))) // past what the compiler puts on a stack
	lo, hi := near-min(near, heapReach), near+heapReach
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	w := heapWatch{advise: madvise}
	defer func() { w.withdraw(time.Now().Add(adviceFor)) }() // all of it
	var last uint64
	// The wait doubles once the heap has held still for a second, up to
	// maxPoll: an idle node wakes ten times a second, not five hundred.
	// A heap that grows maps a new range every few tens of milliseconds,
	// and a longer wait then lets the runtime touch more of it first
	// (42,000 faults a million creations instead of 17,000).
	wait, grew := poll, time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.withdraw(time.Now())
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // a runtime without the figure
		}
		if sample[0].Value.Uint64() == last {
			if time.Since(grew) > time.Second {
				wait = min(2*wait, max(poll, maxPoll))
			}
			t.Reset(wait)
			continue
		}
		last, grew = sample[0].Value.Uint64(), time.Now()
		wait = poll
		t.Reset(wait)
		if thpMode() != "madvise" {
			return // turned off while the node ran
		}
		maps, ok := heapMappings(lo, hi)
		if !ok || !w.grew(maps, time.Now()) {
			return
		}
	}
}

// heapWatch is hugeHeap's record: what it advised, and when.
type heapWatch struct {
	// done holds every range ever advised: none is advised or collapsed
	// twice. Collapsing the heap again would refill what the runtime's
	// scavenger gave back, each time under the process's memory-map lock
	// (why Go itself stopped: golang/go#63334).
	done ranges
	// pending holds the ranges still advised, oldest first: the advice is
	// withdrawn adviceFor after it was given (MADV_NOHUGEPAGE), by when
	// the runtime has used them, so that khugepaged does not gather
	// again, hours on, pages the scavenger gave back.
	pending []advised
	advise  func(a, n uintptr, advice int) error
}

type advised struct {
	a, b uint64
	at   time.Time
}

// grew advises and collapses the parts of maps not advised before; false
// when the kernel refuses huge pages.
func (w *heapWatch) grew(maps [][2]uint64, now time.Time) bool {
	for _, m := range maps {
		for _, r := range w.done.missing(m[0], m[1]) {
			n := uintptr(r[1] - r[0])
			if err := w.advise(uintptr(r[0]), n, syscall.MADV_HUGEPAGE); err == syscall.EINVAL {
				return false
			} else if err != nil {
				continue // gone or changed since the list was read: the next growth looks again
			}
			// Best effort: a kernel before 6.1 refuses it, and a 2 MiB
			// range not yet touched (most of them) is left to fault in
			// whole.
			_ = w.advise(uintptr(r[0]), n, madvCollapse)
			w.done.add(r[0], r[1])
			w.pending = append(w.pending, advised{r[0], r[1], now})
		}
	}
	return true
}

// withdraw takes back the advice given adviceFor before now, or earlier.
func (w *heapWatch) withdraw(now time.Time) {
	i := 0
	for ; i < len(w.pending) && now.Sub(w.pending[i].at) >= adviceFor; i++ {
		r := w.pending[i]
		_ = w.advise(uintptr(r.a), uintptr(r.b-r.a), syscall.MADV_NOHUGEPAGE)
	}
	w.pending = w.pending[i:]
}

const (
	// adviceFor is how long a range stays advised.
	adviceFor = 30 * time.Second
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

// thpMode is the kernel's transparent huge page mode ("always",
// "madvise", "never"), or "" where it has none to read.
func thpMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	_, mode, ok := strings.Cut(string(b), "[")
	mode, _, _ = strings.Cut(mode, "]")
	if !ok {
		return ""
	}
	return mode
}

// godebugDisablesTHP reports whether GODEBUG's last disablethp setting is
// 1: the Go runtime's own switch for huge pages, in the environment.
func godebugDisablesTHP() bool {
	off := false
	for _, kv := range strings.Split(os.Getenv("GODEBUG"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == "disablethp" {
			off = strings.TrimSpace(v) == "1"
		}
	}
	return off
}

// heapMappings lists the mappings of the Go heap of at least a huge page,
// from /proc/self/maps: named the heap's, or private, writable, anonymous
// and unnamed inside [lo, hi); false if the list could not be read.
func heapMappings(lo, hi uint64) ([][2]uint64, bool) {
	file, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, false
	}
	defer file.Close()
	var out [][2]uint64
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
		if err1 != nil || err2 != nil || b < a+2<<20 || !named && (a < lo || b > hi) {
			continue
		}
		out = append(out, [2]uint64{a, b})
	}
	return out, sc.Err() == nil
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
