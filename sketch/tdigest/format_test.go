package tdigest

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/internal/redisnum"
)

// TestFormatCapture checks ParseDouble and the double reply formats
// against format.jsonl: each input was added alone to a digest in
// RedisBloom and read back with TDIGEST.MIN in RESP2 and RESP3.
func TestFormatCapture(t *testing.T) {
	f, err := os.Open("testdata/format.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, notShortest := 0, 0
	for sc.Scan() {
		var r struct{ Input, Add, Resp2, Resp3 string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		n++
		v, ok := redisnum.ParseDouble([]byte(r.Input))
		switch {
		case r.Add == "+OK\r\n":
			if !ok || math.IsInf(v, 0) {
				t.Errorf("%q: RedisBloom accepted it, ParseDouble = %v, %v", r.Input, v, ok)
				continue
			}
		case strings.Contains(r.Add, "finite"):
			if !ok || !math.IsInf(v, 0) {
				t.Errorf("%q: RedisBloom parsed an infinity, ParseDouble = %v, %v", r.Input, v, ok)
			}
			continue
		default:
			if ok {
				t.Errorf("%q: RedisBloom refused it, ParseDouble = %v", r.Input, v)
			}
			continue
		}
		if got := string(redisnum.AppendRESP2Double(nil, v)); got != r.Resp2 {
			t.Errorf("%q: RESP2 %q, want %q", r.Input, got, r.Resp2)
		}
		if got := string(redisnum.AppendRESP3Double(nil, v)); got != r.Resp3 {
			t.Errorf("%q: RESP3 %q, want %q", r.Input, got, r.Resp3)
		}
		s := redisnum.FormatDouble(v)
		if back, _ := strconv.ParseFloat(s, 64); back != v {
			t.Errorf("%q: %q does not read back", r.Input, s)
		}
		if shortest := strconv.FormatFloat(v, 'g', -1, 64); !strings.ContainsAny(s, "ni") && len(strings.Trim(strings.Split(strings.ReplaceAll(s, ".", ""), "e")[0], "-0")) > len(strings.Trim(strings.Split(strings.ReplaceAll(shortest, ".", ""), "e")[0], "-0")) {
			notShortest++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 3000 {
		t.Fatalf("only %d records", n)
	}
	t.Logf("%d values; %d where Grisu2 gave more digits than the shortest", n, notShortest)
}

// TestGlibcLog checks glibcLog bit for bit against glibc's log on the
// reference machine (testdata/glibclog.c wrote the vectors).
func TestGlibcLog(t *testing.T) {
	f, err := os.Open("testdata/glibclog.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, goDiffers := 0, 0
	for sc.Scan() {
		var xb, yb uint64
		fields := strings.Fields(sc.Text())
		xb, err1 := strconv.ParseUint(fields[0], 16, 64)
		yb, err2 := strconv.ParseUint(fields[1], 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		x, want := math.Float64frombits(xb), math.Float64frombits(yb)
		got := glibcLog(x)
		n++
		if math.Float64bits(got) != yb && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("glibcLog(%v) = %v (%#x), glibc %v (%#x)", x, got, math.Float64bits(got), want, yb)
		}
		if math.Float64bits(math.Log(x)) != yb && !math.IsNaN(want) {
			goDiffers++
		}
	}
	if n < 8000 {
		t.Fatalf("only %d vectors", n)
	}
	if goDiffers == 0 {
		t.Error("math.Log agrees everywhere: the vectors no longer show why glibcLog exists")
	}
	t.Logf("%d vectors; math.Log differs on %d", n, goDiffers)
}
