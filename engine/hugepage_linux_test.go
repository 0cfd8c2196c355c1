package engine

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestLargeFilterGetsHugePages: a filter far larger than the cache asks
// for transparent huge pages (its mapping carries MADV_HUGEPAGE, smaps'
// "hg"), where the kernel allows them on request (THP "madvise" or
// "always"). Whether the kernel finds free 2 MiB pages when the bits are
// set is its own affair: on a machine whose memory is fragmented it may
// not, so that is logged, not asserted.
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
	huge, advised, err := anonHugeKB(addr, addr+uintptr(p.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	if !advised {
		t.Fatalf("the %d MiB bit array is not advised for huge pages", p.Bytes>>20)
	}
	t.Logf("%d KiB of the %d MiB bit array in huge pages", huge, p.Bytes>>20)
	for i, w := range b.words() {
		if w != uint64(i) {
			t.Fatalf("word %d reads %d", i, w)
		}
	}
}

// anonHugeKB sums AnonHugePages over the mappings that overlap [lo, hi)
// in /proc/self/smaps (advising part of a mapping splits it), and reports
// whether any of them is advised for huge pages (VmFlags "hg").
func anonHugeKB(lo, hi uintptr) (kb int, advised bool, err error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	in, found := false, false
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
				return 0, false, err
			}
			kb += n
		}
		if in && fields[0] == "VmFlags:" && slices.Contains(fields[1:], "hg") {
			advised = true
		}
	}
	if !found {
		return 0, false, fmt.Errorf("no mapping holds %#x", lo)
	}
	return kb, advised, sc.Err()
}
