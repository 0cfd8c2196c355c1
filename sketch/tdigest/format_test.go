package tdigest

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
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
		v, ok := ParseDouble([]byte(r.Input))
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
		if got := string(AppendRESP2Double(nil, v)); got != r.Resp2 {
			t.Errorf("%q: RESP2 %q, want %q", r.Input, got, r.Resp2)
		}
		if got := string(AppendRESP3Double(nil, v)); got != r.Resp3 {
			t.Errorf("%q: RESP3 %q, want %q", r.Input, got, r.Resp3)
		}
		s := FormatDouble(v)
		if back, _ := strconv.ParseFloat(s, 64); back != v {
			t.Errorf("%q: %q does not read back", r.Input, s)
		}
		if v == 0 || v == math.Trunc(v) && math.Abs(v) <= 0x1p62 {
			continue
		}
		var digits [20]byte
		nd, _ := grisu2(math.Abs(v), digits[:])
		shortest := strings.TrimLeft(strings.Split(strconv.FormatFloat(math.Abs(v), 'e', -1, 64), "e")[0], "0")
		if nd > len(strings.ReplaceAll(shortest, ".", "")) {
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

func TestFormatDoubleForms(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{math.NaN(), "nan"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"},
		{0, "0"}, {math.Copysign(0, -1), "-0"}, {1, "1"}, {-7, "-7"},
		{0x1p62, "4611686018427387904"}, {-0x1p62, "-4611686018427387904"},
		{0x1p62 + 1024, "4611686018427389000"}, {1e17, "100000000000000000"},
		{1e21, "1e+21"}, {1e-7, "1e-7"}, {1e-6, "0.000001"}, {0.1, "0.1"},
		{5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{-3.5e300, "-3.5e+300"}, {123.456, "123.456"},
	} {
		if got := FormatDouble(c.f); got != c.want {
			t.Errorf("FormatDouble(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestParseLongLong(t *testing.T) {
	for _, c := range []struct {
		s  string
		v  int64
		ok bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"-1", -1, true}, {"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true}, {"9223372036854775808", 0, false},
		{"-0", 0, false}, {"+1", 0, false}, {"01", 0, false}, {" 1", 0, false}, {"1 ", 0, false},
		{"", 0, false}, {"-", 0, false}, {"1.0", 0, false}, {"1e3", 0, false},
		{"000000000000000000001", 0, false},
	} {
		v, ok := ParseLongLong([]byte(c.s))
		if ok != c.ok || v != c.v {
			t.Errorf("ParseLongLong(%q) = %d, %v; want %d, %v", c.s, v, ok, c.v, c.ok)
		}
	}
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
