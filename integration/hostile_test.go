package integration

import (
	"bufio"
	enc "encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestHostileParameters: huge capacities, tiny error rates, degenerate
// bucket sizes, growth past the caps and corrupted dump headers each get a
// clear error (or a bounded answer), and the process stays within its
// memory cap.
func TestHostileParameters(t *testing.T) {
	const filterCap, totalCap = 64 << 20, 128 << 20
	n := start(t, "--max-filter-bytes", strconv.Itoa(filterCap), "--maxmemory", strconv.Itoa(totalCap))
	c := n.client(2)
	refused := func(what string, args ...any) {
		t.Helper()
		err := c.Do(ctx(t), args...).Err()
		if err == nil {
			t.Fatalf("%s accepted", what)
		}
		msg := err.Error()
		clear := false
		for _, p := range []string{"OOM", "ERR", "Couldn't", "Capacity", "Bad", "BUCKETSIZE"} {
			clear = clear || strings.HasPrefix(msg, p)
		}
		if !clear {
			t.Fatalf("%s: unclear error %q", what, msg)
		}
		t.Logf("%s: %s", what, msg)
	}
	refused("1 GiB-capacity Bloom at 1e-300", "BF.RESERVE", "a", "1e-300", "1073741824")
	refused("2^30-capacity Cuckoo", "CF.RESERVE", "b", "1073741824", "BUCKETSIZE", "255")
	refused("capacity past 2^30", "BF.RESERVE", "a", "0.01", "2000000000")
	refused("bucket size 0", "CF.RESERVE", "b", "100", "BUCKETSIZE", "0")

	// Tiny error rates are allowed and bounded: ~1000 hashes per item.
	if err := c.Do(ctx(t), "BF.RESERVE", "tiny", "1e-300", "10").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx(t), "BF.ADD", "tiny", "x").Err(); err != nil {
		t.Fatal(err)
	}
	// Degenerate buckets with a huge kick-out budget answer, full or not.
	if err := c.Do(ctx(t), "CF.RESERVE", "deg", "2", "BUCKETSIZE", "1", "MAXITERATIONS", "65535", "EXPANSION", "0").Err(); err != nil {
		t.Fatal(err)
	}
	args := []any{"CF.INSERT", "deg", "ITEMS"}
	for i := 0; i < 20; i++ {
		args = append(args, "i"+strconv.Itoa(i))
	}
	if err := c.Do(ctx(t), args...).Err(); err != nil {
		t.Fatal(err)
	}

	// Growth that would pass the per-filter cap stops with an error element.
	if err := c.Do(ctx(t), "BF.RESERVE", "grow", "0.01", "10000", "EXPANSION", "32768").Err(); err != nil {
		t.Fatal(err)
	}
	madd := []any{"BF.MADD", "grow"}
	for i := 0; i < 10100; i++ {
		madd = append(madd, "g"+strconv.Itoa(i))
	}
	res, err := c.Do(ctx(t), madd...).Slice()
	if err != nil || len(res) == 10100 {
		t.Fatalf("growth past the cap: %d results, %v", len(res), err)
	}
	if e, ok := res[len(res)-1].(error); !ok || !strings.Contains(e.Error(), "max-filter-bytes") {
		t.Fatalf("last element %v", res[len(res)-1])
	}

	// A Bloom header claiming 2^40 bytes, a Cuckoo header with 2^50 buckets.
	hdr := make([]byte, 20+53)
	enc.LittleEndian.PutUint32(hdr[8:], 1)
	enc.LittleEndian.PutUint32(hdr[12:], 5)
	enc.LittleEndian.PutUint32(hdr[16:], 2)
	l := hdr[20:]
	enc.LittleEndian.PutUint64(l[0:], 1<<40)
	enc.LittleEndian.PutUint64(l[8:], 1<<43)
	enc.LittleEndian.PutUint64(l[24:], math.Float64bits(0.01))
	bpe := -math.Log(0.01) / 0.480453013918201
	enc.LittleEndian.PutUint64(l[32:], math.Float64bits(bpe))
	enc.LittleEndian.PutUint32(l[40:], uint32(math.Ceil(0.693147180559945*bpe)))
	enc.LittleEndian.PutUint64(l[44:], 100)
	refused("Bloom header of 1 TiB", "BF.LOADCHUNK", "d", "1", string(hdr))
	cf := make([]byte, 38)
	enc.LittleEndian.PutUint64(cf[8:], 1<<50)
	enc.LittleEndian.PutUint64(cf[24:], 1)
	enc.LittleEndian.PutUint16(cf[32:], 2)
	enc.LittleEndian.PutUint16(cf[34:], 20)
	enc.LittleEndian.PutUint16(cf[36:], 1)
	refused("Cuckoo header of 2^50 buckets", "CF.LOADCHUNK", "e", "1", string(cf))
	for i := 0; i < 50; i++ {
		junk := make([]byte, 20+53*(i%3+1))
		for j := range junk {
			junk[j] = byte(i*31 + j*7)
		}
		refused("corrupted Bloom header", "BF.LOADCHUNK", "j"+strconv.Itoa(i), "1", string(junk))
	}

	// Filters of ~18 MiB each (under the per-filter cap) fit the total cap
	// only six or seven times; then RESERVE answers OOM.
	filled := 0
	for i := 0; i < 20; i++ {
		err := c.Do(ctx(t), "BF.RESERVE", "big"+strconv.Itoa(i), "0.0001", "8000000", "NONSCALING").Err()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatalf("reserve %d: %v", i, err)
			}
			break
		}
		filled++
	}
	if filled == 0 || filled > totalCap/(18<<20) {
		t.Fatalf("%d filters of ~18 MiB fit a %d MiB cap", filled, totalCap>>20)
	}
	t.Logf("%d filters of ~18 MiB reserved before OOM", filled)
	if rss := rssBytes(t, n.cmd.Process.Pid); rss > totalCap+192<<20 {
		t.Fatalf("RSS %d MiB over a %d MiB cap plus overhead", rss>>20, totalCap>>20)
	} else {
		t.Logf("RSS %d MiB with a %d MiB cap", rss>>20, totalCap>>20)
	}
	if err := c.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("server stopped answering: %v", err)
	}
}
