package keyspace

import (
	"strconv"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/engine"
	"github.com/bfserver/bfserver/sketch/window"
)

// BenchmarkWindowCut: what an image write costs a large window (a count
// window of 10^7 at 1%, 24 MB, full) and the Apply beside it: the first
// add after a cut (the capture, and the copies it makes), the adds after
// it, and the bytes the walk writes. One op is a cut, 1,000 adds between
// cut and walk, and the walk.
func BenchmarkWindowCut(b *testing.B) {
	k := New()
	k.TrackChanges()
	apply(b, k, windowCmd(b, command.WReserve, "w", window.Count, 10_000_000, 0, 0.01))
	for i := 0; i < 10_000_000; i += 10_000 {
		items := make([][]byte, 10_000)
		for j := range items {
			items[j] = []byte("f" + strconv.Itoa(i+j))
		}
		apply(b, k, &command.Cmd{Op: command.WAdd, Key: []byte("w"), Items: items, Multi: true, NoCreate: true})
	}
	walk := func(c *Cut) (n int64) {
		buf := make([]byte, engine.ChunkSize)
		c.Walk(func(ck *CutKey) error {
			n += int64(len(ck.Meta()))
			return ck.Chunks(buf, func(ch Chunk) error { n += int64(len(ch.Data)); return nil })
		})
		return n
	}
	walk(k.Cut())
	var first, rest time.Duration
	var written int64
	one := [][]byte{nil}
	b.ResetTimer()
	for i := range b.N {
		c := k.Cut()
		for j := range 1000 {
			one[0] = []byte("r" + strconv.Itoa(i*1000+j))
			t0 := time.Now()
			k.Apply(&command.Cmd{Op: command.WAdd, Key: []byte("w"), Items: one, NoCreate: true})
			if d := time.Since(t0); j == 0 {
				first += d
			} else {
				rest += d
			}
		}
		written += walk(c)
	}
	b.ReportMetric(float64(first.Microseconds())/float64(b.N), "first-add-µs")
	b.ReportMetric(float64(rest.Nanoseconds())/float64(999*b.N), "add-ns")
	b.ReportMetric(float64(written)/float64(b.N)/(1<<20), "MiB-written/cut")
}
