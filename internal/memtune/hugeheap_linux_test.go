package memtune

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestHugeHeapAdvises: a heap mapping is advised as huge pages once the
// heap grows (VmFlags hg in /proc/self/smaps); on a kernel that refuses
// the advice, or whose mode is not "madvise", the watch ends instead.
func TestHugeHeapAdvises(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { hugeHeap(ctx, time.Millisecond); close(done) }()
	big := make([]byte, 64<<20) // a new mapping of the heap, untouched
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	thp := thpMode() == "madvise" && !godebugDisablesTHP() && hugePagesAdvisable(t)
	t.Logf("the watch advises here: %v (the kernel's mode %q)", thp, thpMode())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if thp && advisedHuge(t, addr) {
			break
		}
		select {
		case <-done:
			if thp {
				t.Fatal("the watch ended on a kernel with transparent huge pages")
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the mapping at %#x is not advised (the kernel takes the advice: %v)", addr, thp)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc/self/smaps
	}
	big[0] = 1
	cancel()
	<-done
}

// hugePagesAdvisable reports whether the kernel takes MADV_HUGEPAGE, on
// a mapping of the test's own.
func hugePagesAdvisable(t *testing.T) bool {
	m, err := syscall.Mmap(-1, 0, 4<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	return syscall.Madvise(m, syscall.MADV_HUGEPAGE) == nil
}

// TestRanges: the advised ranges give back exactly the parts of a mapping
// not advised before, and merge what they are given.
func TestRanges(t *testing.T) {
	var r ranges
	if got := r.missing(10, 20); !slices.Equal(got, [][2]uint64{{10, 20}}) {
		t.Fatalf("empty: %v", got)
	}
	r.add(10, 20)
	r.add(30, 40)
	for _, c := range []struct {
		a, b uint64
		want [][2]uint64
	}{
		{10, 20, nil},
		{12, 18, nil},
		{0, 10, [][2]uint64{{0, 10}}},
		{5, 15, [][2]uint64{{5, 10}}},
		{15, 35, [][2]uint64{{20, 30}}},
		{0, 50, [][2]uint64{{0, 10}, {20, 30}, {40, 50}}},
		{40, 60, [][2]uint64{{40, 60}}},
		{35, 45, [][2]uint64{{40, 45}}},
	} {
		if got := r.missing(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("missing(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	r.add(20, 30) // touches both: one range
	r.add(50, 60)
	r.add(5, 12)
	if !slices.Equal(r, ranges{{5, 40}, {50, 60}}) {
		t.Fatalf("after adds: %v", r)
	}
	r.add(44, 46) // alone, between two
	r.add(0, 2)   // alone, before all
	if !slices.Equal(r, ranges{{0, 2}, {5, 40}, {44, 46}, {50, 60}}) {
		t.Fatalf("after adds apart: %v", r)
	}
	if got := r.missing(42, 48); !slices.Equal(got, [][2]uint64{{42, 44}, {46, 48}}) {
		t.Fatalf("missing(42, 48) = %v", got)
	}
	r.add(0, 100)
	if !slices.Equal(r, ranges{{0, 100}}) {
		t.Fatalf("after covering all: %v", r)
	}
}

type adviceCall struct {
	a, n   uintptr
	advice int
}

// TestHeapWatch: a mapping's range is advised and collapsed once, the
// part a grown (merged) mapping adds is advised alone, the advice is
// withdrawn after adviceFor, a range the kernel failed to advise is tried
// again, and EINVAL ends the watch.
func TestHeapWatch(t *testing.T) {
	var calls []adviceCall
	fail := map[uintptr]error{}
	w := heapWatch{advise: func(a, n uintptr, advice int) error {
		calls = append(calls, adviceCall{a, n, advice})
		if advice == syscall.MADV_HUGEPAGE {
			return fail[a]
		}
		return nil
	}}
	const mb = 1 << 20
	t0 := time.Unix(1000, 0)
	expect := func(what string, want ...adviceCall) {
		t.Helper()
		if !slices.Equal(calls, want) {
			t.Fatalf("%s: calls %v, want %v", what, calls, want)
		}
		calls = nil
	}
	if !w.grew([][2]uint64{{64 * mb, 68 * mb}}, t0) {
		t.Fatal("grew refused")
	}
	expect("a new mapping", adviceCall{64 * mb, 4 * mb, syscall.MADV_HUGEPAGE}, adviceCall{64 * mb, 4 * mb, madvCollapse})
	w.grew([][2]uint64{{64 * mb, 72 * mb}}, t0.Add(time.Second)) // merged with the next 4 MiB
	expect("the mapping grown", adviceCall{68 * mb, 4 * mb, syscall.MADV_HUGEPAGE}, adviceCall{68 * mb, 4 * mb, madvCollapse})
	w.grew([][2]uint64{{64 * mb, 72 * mb}}, t0.Add(2*time.Second))
	expect("nothing new")
	fail[80*mb] = syscall.ENOMEM
	w.grew([][2]uint64{{64 * mb, 72 * mb}, {80 * mb, 84 * mb}}, t0.Add(2*time.Second))
	expect("a range the kernel failed", adviceCall{80 * mb, 4 * mb, syscall.MADV_HUGEPAGE})
	delete(fail, 80*mb)
	w.grew([][2]uint64{{80 * mb, 84 * mb}}, t0.Add(3*time.Second))
	expect("tried again", adviceCall{80 * mb, 4 * mb, syscall.MADV_HUGEPAGE}, adviceCall{80 * mb, 4 * mb, madvCollapse})
	w.withdraw(t0.Add(adviceFor - time.Nanosecond))
	expect("before adviceFor")
	w.withdraw(t0.Add(adviceFor + time.Second))
	expect("after adviceFor", adviceCall{64 * mb, 4 * mb, syscall.MADV_NOHUGEPAGE}, adviceCall{68 * mb, 4 * mb, syscall.MADV_NOHUGEPAGE})
	w.withdraw(t0.Add(adviceFor + 3*time.Second))
	expect("the last", adviceCall{80 * mb, 4 * mb, syscall.MADV_NOHUGEPAGE})
	w.grew([][2]uint64{{64 * mb, 84 * mb}}, t0.Add(time.Minute)) // withdrawn ranges are not advised again
	expect("the gap only", adviceCall{72 * mb, 8 * mb, syscall.MADV_HUGEPAGE}, adviceCall{72 * mb, 8 * mb, madvCollapse})
	fail[96*mb] = syscall.EINVAL
	if w.grew([][2]uint64{{96 * mb, 100 * mb}}, t0.Add(time.Minute)) {
		t.Fatal("EINVAL did not end the watch")
	}
}

// advisedHuge reports whether the mapping holding addr has VmFlags hg.
func advisedHuge(t *testing.T, addr uintptr) bool {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			s, e, _ := strings.Cut(r, "-")
			a, err1 := strconv.ParseUint(s, 16, 64)
			b, err2 := strconv.ParseUint(e, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(a) <= addr && addr < uintptr(b)
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line+" ", " hg ")
		}
	}
	return false
}
