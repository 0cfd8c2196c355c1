package integration

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTDigest: t-digests on one durable node through go-redis, RESP2 and
// RESP3: quantiles within the t-digest's error of the truth, errors as
// RedisBloom words them, queries that compress (through the log) shown in
// INFO, DUMP/RESTORE, RENAME and EXPIRE (MERGE drops the destination's
// TTL), COPY refused; after SAVE, more values in the log only and kill
// -9, every digest as it was, digest for digest, buffer included.
func TestTDigest(t *testing.T) {
	n := start(t, "--flush-interval", "200ms")
	c := n.client(2)
	do := func(args ...any) any { t.Helper(); return sketchDo(t, c, args...) }

	do("TDIGEST.CREATE", "lat", "COMPRESSION", "200")
	rng := rand.New(rand.NewPCG(26, 26))
	var truth []float64
	for i := 0; i < 100; i++ {
		args := []any{"TDIGEST.ADD", "lat"}
		for j := 0; j < 500; j++ {
			v := math.Round(rng.ExpFloat64()*20000) / 1000 // milliseconds
			truth = append(truth, v)
			args = append(args, strconv.FormatFloat(v, 'g', -1, 64))
		}
		do(args...)
	}
	sort.Float64s(truth)
	qs := []float64{0.001, 0.01, 0.5, 0.9, 0.99, 0.999}
	args := []any{"TDIGEST.QUANTILE", "lat"}
	for _, q := range qs {
		args = append(args, q)
	}
	got, err := c.Do(ctx(t), args...).Float64Slice()
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		// The digest's answer must sit within the rank error the
		// compression promises (about q(1-q)·π·ln N/c of N, doubled).
		rank := sort.SearchFloat64s(truth, got[i])
		slack := 2*q*(1-q)*math.Pi*math.Log(float64(len(truth)))/200*float64(len(truth)) + 2
		if want := q * float64(len(truth)); math.Abs(float64(rank)-want) > slack {
			t.Errorf("quantile %v: %v is at rank %d, want %v ± %.0f", q, got[i], rank, want, slack)
		}
	}
	info, err := n.client(3).Do(ctx(t), "TDIGEST.INFO", "lat").Result()
	m, ok := info.(map[any]any)
	if err != nil || !ok || m["Compression"] != int64(200) || m["Observations"] != int64(50000) || m["Unmerged nodes"] != int64(0) {
		t.Fatalf("TDIGEST.INFO in RESP3 after a QUANTILE: %#v (%v)", info, err)
	}
	if v, err := c.Do(ctx(t), "TDIGEST.MIN", "lat").Float64(); err != nil || v != truth[0] {
		t.Errorf("MIN %v (%v), want %v", v, err, truth[0])
	}
	if v, err := n.client(3).Do(ctx(t), "TDIGEST.MAX", "lat").Result(); err != nil || v != truth[len(truth)-1] {
		t.Errorf("MAX in RESP3 %v (%v), want %v", v, err, truth[len(truth)-1])
	}
	if err := c.Do(ctx(t), "TDIGEST.CREATE", "lat").Err(); err == nil || err.Error() != "ERR T-Digest: key already exists" {
		t.Fatalf("CREATE over a digest: %v", err)
	}
	if err := c.Do(ctx(t), "TDIGEST.ADD", "nokey", "x").Err(); err == nil || err.Error() != "ERR T-Digest: key does not exist" {
		t.Fatalf("ADD of a missing key: %v", err)
	}
	if err := c.Do(ctx(t), "TDIGEST.QUANTILE", "lat", "1.5").Err(); err == nil || err.Error() != "ERR T-Digest: quantile should be in [0,1]" {
		t.Fatalf("QUANTILE out of range: %v", err)
	}
	if v := do("TYPE", "lat"); v != "TDIS-TYPE" {
		t.Errorf("TYPE: %v", v)
	}
	if v := do("MEMORY", "USAGE", "lat"); v != int64(80+16*1210+32) {
		t.Errorf("MEMORY USAGE: %v", v)
	}

	// A query with a buffer to compress goes through the log: INFO shows it.
	do("TDIGEST.ADD", "lat", "1", "2", "3")
	before := do("TDIGEST.INFO", "lat").([]any)
	if before[7] != int64(3) {
		t.Fatalf("unmerged nodes before the query: %v", before)
	}
	do("TDIGEST.CDF", "lat", "10")
	after := do("TDIGEST.INFO", "lat").([]any)
	if after[7] != int64(0) || after[15].(int64) != before[15].(int64)+1 {
		t.Fatalf("INFO after CDF: %v (before %v)", after, before)
	}

	// DUMP (which compresses), RESTORE, RENAME, EXPIRE, MERGE, COPY.
	do("TDIGEST.ADD", "lat", "4")
	payload := do("DUMP", "lat").(string)
	digest := do("BFX.DIGEST", "lat")
	do("RESTORE", "restored", "0", payload)
	if d := do("BFX.DIGEST", "restored"); d != digest {
		t.Errorf("restored digest %v, want %v", d, digest)
	}
	if a, b := fmt.Sprint(do("TDIGEST.QUANTILE", "lat", "0.5")), fmt.Sprint(do("TDIGEST.QUANTILE", "restored", "0.5")); a != b {
		t.Errorf("restored median %s, want %s", b, a)
	}
	if err := c.Do(ctx(t), "COPY", "lat", "copied").Err(); err == nil || err.Error() != "ERR not supported for this module key" {
		t.Fatalf("COPY: %v", err)
	}
	do("EXPIRE", "restored", "1000")
	do("RENAME", "restored", "renamed")
	if ttl, _ := c.TTL(ctx(t), "renamed").Result(); ttl <= 0 {
		t.Errorf("TTL after RENAME: %v", ttl)
	}
	do("TDIGEST.CREATE", "merged", "COMPRESSION", "50")
	do("EXPIRE", "merged", "1000")
	do("TDIGEST.MERGE", "merged", "2", "lat", "renamed")
	if ttl, _ := c.TTL(ctx(t), "merged").Result(); ttl != -1 {
		t.Errorf("TTL after MERGE into the key: %v, want none", ttl)
	}
	if v := do("TDIGEST.INFO", "merged").([]any); v[1] != int64(50) || v[13] != int64(2*50004) {
		t.Errorf("merged INFO %v", v)
	}
	do("TDIGEST.ADD", "renamed", "1e6")
	if v := do("TDIGEST.MAX", "lat"); v == "1000000" {
		t.Error("an ADD to the restored copy showed in the original")
	}

	keys := []string{"lat", "renamed", "merged"}
	want := map[string]any{}
	for _, k := range keys {
		want[k] = do("BFX.DIGEST", k)
	}
	do("SAVE")
	do("TDIGEST.ADD", "lat", "7", "8", "9") // only in the log, left in the buffer
	want["lat"] = do("BFX.DIGEST", "lat")
	wantInfo := fmt.Sprint(do("TDIGEST.INFO", "lat"))
	n.kill()
	n.launch()
	c = n.client(2)
	for _, k := range keys {
		if d := do("BFX.DIGEST", k); d != want[k] {
			t.Errorf("after kill -9: %s digest %v, want %v", k, d, want[k])
		}
	}
	if v := fmt.Sprint(do("TDIGEST.INFO", "lat")); v != wantInfo {
		t.Errorf("INFO after restart %s, want %s", v, wantInfo)
	}
	if ttl, _ := c.TTL(ctx(t), "renamed").Result(); ttl <= 0 || ttl > 1000*time.Second {
		t.Errorf("TTL after restart: %v", ttl)
	}
	if _, err := c.Do(ctx(t), "TDIGEST.QUANTILE", "nokey", "0.5").Result(); err == redis.Nil || err == nil {
		t.Errorf("QUANTILE of a missing key after restart: %v", err)
	}
}
