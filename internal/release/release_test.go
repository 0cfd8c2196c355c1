package release

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestOneWriterPublishes: with one writer, readers loading atomically see
// a word's bits only ever grow (Or64 keeps what was set), every word
// whole, and a record published by StorePointer after its fields were
// stored (Store64) with those fields in place.
func TestOneWriterPublishes(t *testing.T) {
	type record struct{ a, b uint64 }
	var word uint64
	var rec unsafe.Pointer
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for !done.Load() {
				w := atomic.LoadUint64(&word)
				if w&last != last {
					errs <- "a bit once set was seen clear"
					return
				}
				last = w
				if r := (*record)(atomic.LoadPointer(&rec)); r != nil {
					if a, b := atomic.LoadUint64(&r.a), atomic.LoadUint64(&r.b); a == 0 || b != a*3 {
						errs <- "a record was seen before its fields"
						return
					}
				}
			}
		}()
	}
	for i := range 64 {
		Or64(&word, 1<<i)
		r := new(record)
		Store64(&r.a, uint64(i+1))
		Store64(&r.b, uint64(i+1)*3)
		StorePointer(&rec, unsafe.Pointer(r))
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if word != 1<<64-1 {
		t.Fatalf("word %#x after setting every bit", word)
	}
	if r := (*record)(rec); r.a != 64 || r.b != 192 {
		t.Fatalf("last record %+v", *r)
	}
}
