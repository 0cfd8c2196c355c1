package window_test

import (
	"fmt"

	"github.com/bfserver/bfserver/sketch/window"
)

// De-duplicating an event stream over the last minute: the caller passes
// the time of each event (in bfserver, the proposer's clock).
func Example() {
	f, err := window.New(window.Options{
		ErrorRate: 0.001, Kind: window.Time, WindowMs: 60_000, Capacity: 10_000,
		Now: 1_700_000_000_000,
	})
	if err != nil {
		panic(err)
	}
	t := int64(1_700_000_000_000)
	fmt.Println(f.Add([]byte("evt-1"), t))           // new
	fmt.Println(f.Add([]byte("evt-1"), t+30_000))    // a duplicate within the minute
	fmt.Println(f.Exists([]byte("evt-1"), t+89_999)) // re-added at t+30s: still inside
	in := f.Info(t + 200_000)
	fmt.Println(f.Exists([]byte("evt-1"), t+30_000+int64(in.Forgotten)))
	// Output:
	// true
	// false
	// true
	// false
}
