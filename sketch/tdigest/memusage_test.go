package tdigest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/golden"
)

func readRecords(t testing.TB, path string) []golden.Record {
	t.Helper()
	recs, err := golden.LoadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

// TestMemUsageCapture checks MemUsage against memusage.jsonl: TDIGEST.INFO's
// Memory usage for compressions 1 to 100000, constant as values arrive,
// and MEMORY USAGE = MemUsage + the key's own overhead, the same overhead
// as a Bloom key of the same name (what keyspace.KeyMemoryUsage adds).
func TestMemUsageCapture(t *testing.T) {
	recs := readRecords(t, "testdata/memusage.jsonl")
	integer := func(r golden.Record) int64 {
		t.Helper()
		s := strings.TrimSuffix(strings.TrimPrefix(string(r.Want()), ":"), "\r\n")
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("not an integer reply: %q", r.Want())
		}
		return n
	}
	var d *Digest
	bloomOverhead := map[string]int64{}
	var bloomUsage int64
	checked := 0
	for _, r := range recs {
		args := r.Argv()
		if len(args) == 0 {
			continue
		}
		cmd := strings.ToUpper(string(args[0]))
		switch {
		case cmd == "TDIGEST.CREATE":
			c := int64(DefaultCompression)
			if len(args) == 4 { // COMPRESSION c
				var err error
				if c, err = strconv.ParseInt(string(args[3]), 10, 64); err != nil {
					t.Fatal(err)
				}
			}
			d, _ = New(c)
		case cmd == "TDIGEST.INFO":
			if !strings.Contains(string(r.Want()), "Memory usage\r\n:"+strconv.FormatUint(d.MemUsage(), 10)+"\r\n") {
				t.Errorf("INFO %q: Memory usage is not %d", r.Want(), d.MemUsage())
			}
			checked++
		case cmd == "MEMORY" && r.Section == "key-length":
			n := integer(r)
			if _, ok := bloomOverhead[string(args[2])]; !ok {
				bloomUsage = n
				bloomOverhead[string(args[2])] = -1
				continue
			}
			if want := bloomOverhead[string(args[2])]; n-int64(d.MemUsage()) != want {
				t.Errorf("key %d bytes: MEMORY USAGE %d - MemUsage %d != Bloom's overhead %d",
					len(args[2]), n, d.MemUsage(), want)
			}
			checked++
		case cmd == "BF.INFO":
			s := string(r.Want())
			size, _ := strconv.ParseInt(s[strings.LastIndex(s, ":")+1:len(s)-2], 10, 64)
			bloomOverhead[string(args[1])] = bloomUsage - size
		case cmd == "MEMORY":
			if n := integer(r); n != int64(d.MemUsage())+32 {
				t.Errorf("MEMORY USAGE k = %d, MemUsage %d + 32", n, d.MemUsage())
			}
			checked++
		}
	}
	if checked < 60 {
		t.Fatalf("only %d checks", checked)
	}
}

func TestMemUsageShape(t *testing.T) {
	for _, c := range []struct {
		compression int64
		want        int64
	}{
		{1, 80 + 16*16}, {100, 9840}, {357913939, 80 + 16*2147483644},
		{357913940, 80 - 16*2147483646}, // RedisBloom's wrapped capacity, a negative reply
	} {
		d, ok := New(c.compression)
		if !ok {
			t.Fatalf("New(%d) refused", c.compression)
		}
		if got := d.Info().MemoryUsage; got != c.want {
			t.Errorf("compression %d: Memory usage %d, want %d", c.compression, got, c.want)
		}
	}
}
