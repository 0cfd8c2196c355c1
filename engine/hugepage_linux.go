package engine

import (
	"sync/atomic"
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

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the range in
// as if written, without writing it.
const madvPopulateWrite = 23

// prefaultStep is how much prefault asks for at once, between looks at
// its stop flag.
const prefaultStep = 8 << 20

// prefault faults in the whole pages of a large array, writable, without
// changing a byte of it, so that the kernel zeroes them now, on the
// calling goroutine, and not at their first write. It stops early once
// stop is set. Like adviseHuge it is a hint: an older kernel's EINVAL, or
// any error, leaves the pages to fault in when written.
func prefault[T uint64 | byte](s []T, stop *atomic.Bool) {
	n := len(s) * int(unsafe.Sizeof(s[0]))
	if n < 2*hugePageBytes {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	start := uintptr(p)
	page := uintptr(syscall.Getpagesize())
	first := (start + page - 1) &^ (page - 1)
	last := (start + uintptr(n)) &^ (page - 1)
	for off := first; off < last && !stop.Load(); off += prefaultStep {
		end := min(off+prefaultStep, last)
		if syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, off-start)), end-off), madvPopulateWrite) != nil {
			return
		}
	}
}
