package engine

import (
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

// pageRange is the whole pages in [p, p+n).
func pageRange(p unsafe.Pointer, n uintptr) (first, last uintptr) {
	page := uintptr(syscall.Getpagesize())
	return (uintptr(p) + page - 1) &^ (page - 1), (uintptr(p) + n) &^ (page - 1)
}

// resident counts the resident pages among the whole pages in [p, p+n),
// by mincore(2), and returns them with the number of pages.
func resident(t *testing.T, p unsafe.Pointer, n uintptr) (in, pages int) {
	t.Helper()
	first, last := pageRange(p, n)
	vec := make([]byte, (last-first)/uintptr(syscall.Getpagesize()))
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, first, last-first, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

// release gives the whole pages in [p, p+n) back to the kernel (they read
// as zero again), so that a new array is as fresh as a load's even where
// the heap reused memory.
func release(t *testing.T, p unsafe.Pointer, n uintptr) {
	t.Helper()
	first, last := pageRange(p, n)
	if err := syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, first-uintptr(p))), last-first), syscall.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestPrefault: Prefault makes a fresh array's pages resident without
// changing a byte, also while LoadBytes fills the array, and does nothing
// once stopped.
func TestPrefault(t *testing.T) {
	p, _ := SizeBloom(30_000_000, 0.01) // about 34 MiB
	b := NewBloom(p)
	base, n := unsafe.Pointer(b.w), uintptr(p.Bytes)

	var stop atomic.Bool
	stop.Store(true)
	release(t, base, n)
	b.Prefault(&stop)
	if in, pages := resident(t, base, n); in > pages/8 {
		t.Fatalf("a stopped Prefault left %d of %d pages resident", in, pages)
	}

	stop.Store(false)
	src := make([]byte, ChunkSize)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.Prefault(&stop) })
	for off := uint64(0); off+ChunkSize <= p.Bytes; off += 2 * ChunkSize { // every other chunk
		b.LoadBytes(src, off)
	}
	wg.Wait()
	if in, pages := resident(t, base, n); in != pages {
		t.Fatalf("after Prefault %d of the array's %d pages are resident", in, pages)
	}
	all := unsafe.Slice((*byte)(base), p.Bytes)
	for off := uint64(0); off < p.Bytes; off++ {
		want := byte(0)
		if chunk := off / ChunkSize; chunk%2 == 0 && (chunk+1)*ChunkSize <= p.Bytes {
			want = src[off%ChunkSize]
		}
		if all[off] != want {
			t.Fatalf("byte %d reads %d after Prefault, want %d", off, all[off], want)
		}
	}
}
