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
// the advice, or with huge pages turned off, the watch ends instead.
func TestHugeHeapAdvises(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { hugeHeap(ctx, time.Millisecond); close(done) }()
	big := make([]byte, 64<<20) // a new mapping of the heap, untouched
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	thp := hugePagesAdvisable(t) && !thpRefused()
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
	r.add(0, 100)
	if !slices.Equal(r, ranges{{0, 100}}) {
		t.Fatalf("after covering all: %v", r)
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
