package engine

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestLargeFilterGetsHugePages: a filter far larger than the cache is
// backed by transparent huge pages once its bits are set, where the kernel
// allows them on request (THP "madvise" or "always").
func TestLargeFilterGetsHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off on this kernel (%q, %v)", mode, err)
	}
	p, _ := SizeBloom(50_000_000, 0.01)
	b := NewBloom(p)
	for i := range b.words() {
		b.words()[i] = uint64(i)
	}
	addr := uintptr(unsafe.Pointer(b.w))
	huge, err := anonHugeKB(addr, addr+uintptr(p.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	if huge == 0 {
		t.Fatalf("the %d MiB bit array has no huge pages", p.Bytes>>20)
	}
	for i, w := range b.words() {
		if w != uint64(i) {
			t.Fatalf("word %d reads %d", i, w)
		}
	}
}

// anonHugeKB sums AnonHugePages over the mappings that overlap [lo, hi)
// in /proc/self/smaps (advising part of a mapping splits it).
func anonHugeKB(lo, hi uintptr) (int, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	in, found, kb := false, false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		if from, to, ok := strings.Cut(fields[0], "-"); ok {
			a, err1 := strconv.ParseUint(from, 16, 64)
			b, err2 := strconv.ParseUint(to, 16, 64)
			if err1 == nil && err2 == nil {
				in = a < uint64(hi) && uint64(lo) < b
				found = found || in
				continue
			}
		}
		if in && fields[0] == "AnonHugePages:" {
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				return 0, err
			}
			kb += n
		}
	}
	if !found {
		return 0, fmt.Errorf("no mapping holds %#x", lo)
	}
	return kb, sc.Err()
}
