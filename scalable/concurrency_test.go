package scalable

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersNoFalseNegative: while one writer adds items (growing
// the chain and kicking fingerprints around in the cuckoo filter), readers
// check every item already acknowledged and must never miss one. Run it
// under -race.
func TestConcurrentReadersNoFalseNegative(t *testing.T) {
	ch, err := NewChain(100, 0.01, 2, false, noCap)
	if err != nil {
		t.Fatal(err)
	}
	// Large enough for the engine's loads-first path (above its cache size).
	big, err := NewChain(8_000_000, 0.01, 2, true, noCap)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := NewCuckoo(CuckooParams{Capacity: 64, BucketSize: 2, MaxIterations: 50, Expansion: 2}, noCap)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var acked atomic.Int64 // items [0, acked) are added to both filters
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				upto := acked.Load()
				for i := int64(0); i < upto; i += 7 {
					item := []byte("item:" + strconv.FormatInt(i, 10))
					if !ch.Test(item) || !big.Test(item) {
						t.Errorf("bloom lost %s", item)
						return
					}
					if !cf.Exists(item) {
						t.Errorf("cuckoo lost %s", item)
						return
					}
				}
			}
		}()
	}
	for i := int64(0); i < n; i++ {
		item := []byte("item:" + strconv.FormatInt(i, 10))
		if _, err := ch.Add(item, noCap); err != nil {
			t.Fatal(err)
		}
		if _, err := big.Add(item, noCap); err != nil {
			t.Fatal(err)
		}
		if cf.Insert(item, false, noCap) != Inserted {
			t.Fatalf("cuckoo insert %d failed", i)
		}
		acked.Store(i + 1)
	}
	close(stop)
	wg.Wait()
	if len(ch.Links()) < 3 || cf.Info().NumFilters < 3 {
		t.Fatalf("filters did not grow: %d links, %d sub-filters", len(ch.Links()), cf.Info().NumFilters)
	}
}
