package memtune

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestHugeHeapAdvises: a heap mapping made after the watch starts is
// advised as huge pages (VmFlags hg in /proc/self/smaps); on a kernel
// without transparent huge pages the watch ends instead.
func TestHugeHeapAdvises(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { hugeHeap(ctx, time.Millisecond); close(done) }()
	big := make([]byte, 64<<20) // a new mapping of the heap, untouched
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	_, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled")
	thp := err == nil
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
			t.Fatalf("after 10 s the mapping at %#x is not advised (THP sysfs present: %v)", addr, thp)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc/self/smaps
	}
	big[0] = 1
	cancel()
	<-done
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
