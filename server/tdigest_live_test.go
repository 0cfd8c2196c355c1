package server_test

import (
	"bufio"
	"bytes"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
)

// TestTDigestLiveDifferential runs seeded random sessions of TDIGEST
// commands against a live RedisBloom 8.8.0 and this server side by side,
// comparing every reply byte for byte, and moves digests between them
// through DUMP/RESTORE (both DUMP the same bytes, and a payload RESTOREd
// into both answers alike). It needs the reference server, so it runs only
// when TDIGEST_REDISBLOOM names one (it FLUSHALLs it):
//
//	/work/shared/anchors/start-redisbloom 7541
//	TDIGEST_REDISBLOOM=127.0.0.1:7541 go test -run TestTDigestLiveDifferential ./server
func TestTDigestLiveDifferential(t *testing.T) {
	addr := os.Getenv("TDIGEST_REDISBLOOM")
	if addr == "" {
		t.Skip("TDIGEST_REDISBLOOM not set")
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ref := &client{c: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	ours := dial(t, startServer(t, nil))
	sessions, ops := 200, 150
	if s := os.Getenv("TDIGEST_LIVE_SESSIONS"); s != "" {
		sessions, _ = strconv.Atoi(s)
	}
	stats := map[string]int{}
	for seed := range sessions {
		liveTDigestSession(t, ref, ours, uint64(seed), ops, stats)
		if t.Failed() {
			t.Fatalf("session %d failed", seed)
		}
	}
	t.Logf("%d sessions: %v", sessions, stats)
}

func liveTDigestSession(t *testing.T, ref, ours *client, seed uint64, nops int, stats map[string]int) {
	rnd := rand.New(rand.NewPCG(seed, 0x7d16))
	same := func(args ...string) []byte {
		t.Helper()
		want := ref.do(t, argv(args...))
		if got := ours.do(t, argv(args...)); !bytes.Equal(got, want) {
			t.Fatalf("%s\n ours       %q\n RedisBloom %q", show(argv(args...)), got, want)
		}
		stats[args[0]]++
		return want
	}
	keys := []string{"a", "b", "c"}
	compressions := []int{1, 2, 5, 10, 20, 50, 100, 500}
	compression := func() string { return strconv.Itoa(compressions[rnd.IntN(len(compressions))]) }
	same("FLUSHALL")
	for _, k := range keys {
		same("TDIGEST.CREATE", k, "COMPRESSION", compression())
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
	for range nops {
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
			for range n {
				args = append(args, keys[rnd.IntN(3)])
			}
			switch rnd.IntN(4) {
			case 0:
				args = append(args, "COMPRESSION", compression())
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
		default:
			// DUMP compresses the key on both; the payload goes back into
			// both as "r", which must then answer alike.
			dump := same("DUMP", k)
			i := bytes.Index(dump, []byte("\r\n"))
			same("RESTORE", "r", "0", string(dump[i+2:len(dump)-2]), "REPLACE")
			for _, q := range [][]string{
				{"TDIGEST.INFO", "r"}, {"TDIGEST.MIN", "r"}, {"TDIGEST.MAX", "r"},
				{"TDIGEST.QUANTILE", "r", "0", "0.1", "0.5", "0.9", "1"}, {"TDIGEST.CDF", "r", "0", "10", "50"},
				{"TDIGEST.RANK", "r", "5", "50"}, {"TDIGEST.BYREVRANK", "r", "0", "3", "10"},
				{"TDIGEST.TRIMMED_MEAN", "r", "0.1", "0.9"}, {"TDIGEST.ADD", "r", "1", "2"}, {"DUMP", "r"},
			} {
				same(q...)
			}
		}
	}
}
