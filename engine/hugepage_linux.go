package engine

import (
	"syscall"
	"unsafe"
)

// hugePageBytes is the x86-64 and arm64 transparent huge page size.
const hugePageBytes = 2 << 20

// adviseHuge asks the kernel to back a large, freshly allocated array with
// transparent huge pages. A filter bigger than the CPU cache misses the TLB
// on nearly every probe with 4 KiB pages; with 2 MiB pages the page walk
// mostly hits. It is a hint, like the kernel's own (THP "madvise" mode):
// any error leaves ordinary pages, and no byte of the array changes.
func adviseHuge[T uint64 | byte](s []T) {
	n := len(s) * int(unsafe.Sizeof(s[0]))
	if n < 2*hugePageBytes {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	start := uintptr(p)
	first := (start + hugePageBytes - 1) &^ (hugePageBytes - 1)
	last := (start + uintptr(n)) &^ (hugePageBytes - 1)
	if last <= first {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, first-start)), last-first), syscall.MADV_HUGEPAGE)
}
