package window

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzUnmarshal: any input either is refused or loads into a filter that
// answers, reports and dumps back to exactly the input.
func FuzzUnmarshal(f *testing.F) {
	f.Add(sample(f).Marshal())
	small := mustNew(f, Options{ErrorRate: 0.1, Kind: Count, Count: 3})
	small.Add([]byte("a"), 0)
	f.Add(small.Marshal())
	f.Add([]byte("BFXW"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Unmarshal(b, 1<<20)
		if err != nil {
			return
		}
		if !bytes.Equal(g.Marshal(), b) {
			t.Fatal("accepted dump does not marshal back to itself")
		}
		g.Exists([]byte("x"), g.last+1)
		g.Info(g.last + 1)
		g.Add([]byte("x"), g.last+1)
		if !g.Exists([]byte("x"), g.last) {
			t.Fatal("false negative right after an add")
		}
	})
}

// FuzzLoadChunks: a header and a stream of (cursor, chunk) records, as a
// LOADCHUNK sequence would give them, never panic; what loads dumps back
// through Chunks into an equal filter.
func FuzzLoadChunks(f *testing.F) {
	s := sample(f)
	var rec []byte
	for c, d := range s.Chunks(1000) {
		if c == 1 {
			continue
		}
		rec = binary.AppendVarint(rec, c)
		rec = binary.AppendUvarint(rec, uint64(len(d)))
		rec = append(rec, d...)
	}
	f.Add(s.Header(), rec)
	f.Add(s.Header(), []byte{})
	f.Fuzz(func(t *testing.T, header, records []byte) {
		g, err := LoadHeader(header, 1<<20)
		if err != nil {
			return
		}
		for len(records) > 0 {
			c, n := binary.Varint(records)
			if n <= 0 {
				break
			}
			records = records[n:]
			l, n := binary.Uvarint(records)
			if n <= 0 || l > uint64(len(records)-n) {
				break
			}
			data := records[n : n+int(l)]
			records = records[n+int(l):]
			_ = g.LoadChunk(c, data)
		}
		h, err := Load(g.Chunks(4096), 1<<20)
		if err != nil || !Equal(g, h) {
			t.Fatalf("reload: %v", err)
		}
		g.Info(g.last)
	})
}

// FuzzOps: a random sequence of adds, reads and clock moves on a small
// filter of fuzzed parameters never panics, never loses an item inside
// its window, and keeps every invariant a dump checks (a Marshal always
// unmarshals to an equal filter).
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 3, 10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 0, 50, 5, 1, 1, 200, 1, 1, 128, 2, 3, 255})
	f.Add([]byte{2, 2, 9, 1, 7, 7, 7, 7, 7, 0, 0, 0, 250, 250})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		rates := []float64{0.5, 0.1, 0.01, 1e-4}
		o := Options{ErrorRate: rates[b[1]%4], Now: int64(b[3]) * 1000}
		switch b[0] % 3 {
		case 0:
			o.Kind, o.Count = Count, uint64(b[2]%64)+1
		default:
			o.Kind, o.WindowMs, o.Capacity = Time, int64(b[2])*7+1, uint64(b[2]%32)+1
			o.Overflow = Overflow(b[0] % 3 / 2) // KeepTime or KeepRate
		}
		fl, err := New(o)
		if err != nil {
			t.Fatalf("New(%+v): %v", o, err)
		}
		type rec struct {
			at  int64  // the filter's clock at the add
			seq uint64 // insert number
		}
		last := map[byte]rec{}
		now, seq := o.Now, uint64(0)
		for _, op := range b[4:] {
			item := []byte{op & 15}
			switch op >> 6 {
			case 0, 1: // add
				seq++
				fl.Add(item, now)
				last[op&15] = rec{fl.last, seq}
			case 2: // move the clock, forwards or back
				now += int64(op&63) - 16
			case 3: // a long jump
				now += int64(op&63) * int64(o.WindowMs+1)
			}
			for it, r := range last {
				inWindow := false
				if o.Kind == Count {
					inWindow = seq-r.seq < o.Count
				} else if o.Overflow == KeepTime {
					inWindow = max(now, fl.last)-r.at < o.WindowMs
				}
				if inWindow && !fl.Exists([]byte{it}, now) {
					t.Fatalf("item %d (added at %d, insert %d) missing at %d, insert %d", it, r.at, r.seq, now, seq)
				}
			}
			if int(fl.head) >= fl.shape.Slices() {
				t.Fatal("head out of range")
			}
		}
		fl.Info(now)
		g, err := Unmarshal(fl.Marshal(), 0)
		if err != nil || !Equal(fl, g) {
			t.Fatalf("state does not survive a dump: %v", err)
		}
		if !slices.Equal(fl.ones, g.ones) {
			t.Fatalf("slice counts %v, recounted %v", fl.ones, g.ones)
		}
	})
}
