package tdigest

import (
	"bufio"
	"bytes"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
)

// TestLiveDifferential runs seeded random sessions against a live
// RedisBloom 8.8.0 and the package side by side, comparing every reply
// byte for byte, and moves digests both ways through DUMP/RESTORE: our
// payloads are RESTOREd into RedisBloom (which must then answer as we do
// and DUMP the same bytes back), and RedisBloom's are decoded here (to the
// state our digest has after the same compression). It needs the server,
// so it runs only when TDIGEST_REDISBLOOM names one (it FLUSHALLs it):
//
//	/work/shared/anchors/start-redisbloom 7541
//	TDIGEST_REDISBLOOM=127.0.0.1:7541 go test -run TestLiveDifferential ./sketch/tdigest
func TestLiveDifferential(t *testing.T) {
	addr := os.Getenv("TDIGEST_REDISBLOOM")
	if addr == "" {
		t.Skip("TDIGEST_REDISBLOOM not set")
	}
	c := dialRESP(t, addr)
	sessions, ops := 200, 150
	if s := os.Getenv("TDIGEST_LIVE_SESSIONS"); s != "" {
		sessions, _ = strconv.Atoi(s)
	}
	stats := map[string]int{}
	for seed := 0; seed < sessions; seed++ {
		liveSession(t, c, uint64(seed), ops, stats)
		if t.Failed() {
			t.Fatalf("session %d failed", seed)
		}
	}
	t.Logf("%d sessions: %v", sessions, stats)
}

func liveSession(t *testing.T, c *respConn, seed uint64, nops int, stats map[string]int) {
	rnd := rand.New(rand.NewPCG(seed, 0x7d16))
	s := newRefServer()
	keys := []string{"a", "b", "c"}
	compressions := []int{1, 2, 5, 10, 20, 50, 100, 500}
	same := func(args ...string) {
		t.Helper()
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		sameB(t, c, s, bs)
		stats[args[0]]++
	}
	same("FLUSHALL")
	for _, k := range keys {
		same("TDIGEST.CREATE", k, "COMPRESSION", strconv.Itoa(compressions[rnd.IntN(len(compressions))]))
	}
	value := func(dist int) string {
		switch dist {
		case 0:
			return strconv.Itoa(rnd.IntN(40))
		case 1:
			return strconv.FormatFloat(rnd.NormFloat64()*10+50, 'g', 6, 64)
		case 2:
			return strconv.FormatFloat(rnd.ExpFloat64()*20, 'g', -1, 64)
		case 3:
			return strconv.FormatFloat((rnd.Float64()*2-1)*math.Pow(10, float64(rnd.IntN(600)-300)), 'g', -1, 64)
		}
		return "7"
	}
	for i := 0; i < nops; i++ {
		k := keys[rnd.IntN(len(keys))]
		switch x := rnd.IntN(100); {
		case x < 40:
			args := []string{"TDIGEST.ADD", k}
			dist := rnd.IntN(5)
			for n := 1 + rnd.IntN([]int{3, 30, 300}[rnd.IntN(3)]); n > 0; n-- {
				args = append(args, value(dist))
			}
			same(args...)
		case x < 48:
			n := 1 + rnd.IntN(3)
			args := []string{"TDIGEST.MERGE", keys[rnd.IntN(3)], strconv.Itoa(n)}
			for j := 0; j < n; j++ {
				args = append(args, keys[rnd.IntN(3)])
			}
			switch rnd.IntN(4) {
			case 0:
				args = append(args, "COMPRESSION", strconv.Itoa(compressions[rnd.IntN(len(compressions))]))
			case 1:
				args = append(args, "OVERRIDE")
			}
			same(args...)
		case x < 50:
			same("TDIGEST.RESET", k)
		case x < 58:
			same("TDIGEST.QUANTILE", k, "0", "0.001", "0.01", "0.25", "0.5", "0.75", "0.99", "0.999", "1")
		case x < 64:
			same("TDIGEST.CDF", k, value(rnd.IntN(5)), value(rnd.IntN(5)), "0", "-inf", "inf")
		case x < 70:
			same([]string{"TDIGEST.RANK", "TDIGEST.REVRANK"}[rnd.IntN(2)], k, value(0), value(1), value(2))
		case x < 76:
			same([]string{"TDIGEST.BYRANK", "TDIGEST.BYREVRANK"}[rnd.IntN(2)], k, "0", "1",
				strconv.Itoa(rnd.IntN(1000)), strconv.Itoa(rnd.IntN(20)))
		case x < 80:
			lo := rnd.Float64() / 2
			same("TDIGEST.TRIMMED_MEAN", k, strconv.FormatFloat(lo, 'g', -1, 64),
				strconv.FormatFloat(lo+rnd.Float64()/2+1e-9, 'g', -1, 64))
		case x < 84:
			same("TDIGEST.INFO", k)
			same("TDIGEST.MIN", k)
			same("TDIGEST.MAX", k)
		case x < 92:
			liveOursIntoRedisBloom(t, c, s, k)
			stats["ours->RedisBloom"]++
		default:
			liveRedisBloomIntoOurs(t, c, s, k)
			stats["RedisBloom->ours"]++
		}
	}
}

// liveOursIntoRedisBloom RESTOREs our encoding of key k (without
// compressing our digest) into RedisBloom key "r" and compares what both
// then answer about it.
func liveOursIntoRedisBloom(t *testing.T, c *respConn, s *refServer, k string) {
	t.Helper()
	d, ok := s.keys[k].(*Digest)
	if !ok {
		return
	}
	payload := dumpPayload(d.Clone())
	if got := c.do(t, [][]byte{[]byte("RESTORE"), []byte("r"), []byte("0"), payload, []byte("REPLACE")}); string(got) != "+OK\r\n" {
		t.Fatalf("RedisBloom refused our payload: %q", got)
	}
	v, err := restorePayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	s.keys["r"] = v
	for _, q := range [][]string{
		{"TDIGEST.INFO", "r"}, {"TDIGEST.MIN", "r"}, {"TDIGEST.MAX", "r"},
		{"TDIGEST.QUANTILE", "r", "0", "0.1", "0.5", "0.9", "1"}, {"TDIGEST.CDF", "r", "0", "10", "50"},
		{"TDIGEST.RANK", "r", "5", "50"}, {"TDIGEST.BYREVRANK", "r", "0", "3", "10"},
		{"TDIGEST.TRIMMED_MEAN", "r", "0.1", "0.9"}, {"DUMP", "r"},
	} {
		bs := make([][]byte, len(q))
		for i, a := range q {
			bs[i] = []byte(a)
		}
		sameB(t, c, s, bs)
	}
	if got := c.do(t, [][]byte{[]byte("DUMP"), []byte("r")}); !bytes.Contains(got, payload) {
		t.Fatalf("RedisBloom's DUMP of our payload differs:\n got %q\nsent %q", got, payload)
	}
}

// liveRedisBloomIntoOurs DUMPs key k on RedisBloom (which compresses it
// there), decodes the payload, and checks it equals our digest after the
// same compression.
func liveRedisBloomIntoOurs(t *testing.T, c *respConn, s *refServer, k string) {
	t.Helper()
	d, ok := s.keys[k].(*Digest)
	if !ok {
		return
	}
	raw := c.do(t, [][]byte{[]byte("DUMP"), []byte(k)})
	i := bytes.Index(raw, []byte("\r\n"))
	payload := raw[i+2 : len(raw)-2]
	got, err := restorePayload(payload)
	if err != nil {
		t.Fatalf("decoding RedisBloom's DUMP of %s: %v", k, err)
	}
	d.Compress()
	want := d.Clone()
	if want.unmerged != 0 { // not saved by RedisBloom: zero nodes after a load
		for j := want.merged; j < want.merged+want.unmerged; j++ {
			want.mean[j], want.weight[j] = 0, 0
		}
	}
	if !got.(*Digest).Equal(want) {
		t.Fatalf("RedisBloom's DUMP of %s decodes to another state", k)
	}
}

func sameB(t *testing.T, c *respConn, s *refServer, args [][]byte) {
	t.Helper()
	want := c.do(t, args)
	got, err := s.do("", 2, args)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s\n ours %q\n RedisBloom %q", short(args), got, want)
	}
}

type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respConn {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &respConn{c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

func (c *respConn) do(t *testing.T, args [][]byte) []byte {
	t.Helper()
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.c.Write(golden.Encode(args)); err != nil {
		t.Fatal(err)
	}
	out, err := golden.ReadFrame(c.r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
