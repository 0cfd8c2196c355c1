package integration

import (
	"bufio"
	enc "encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procStatus reads fields of /proc/PID/status, in bytes.
func procStatus(t *testing.T, path string, fields ...string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, name := range fields {
			if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				out[name] = kb << 10
			}
		}
	}
	if len(out) != len(fields) {
		t.Fatalf("%s lacks some of %v", path, fields)
	}
	return out
}

// TestDefaultCapLargeReserve: a default node creates the filters a default
// Redis 8 with RedisBloom creates when the machine can hold them (the
// 1.13 GB BF.RESERVE bf 0.000001 300000000, a 1 GiB Cuckoo filter), with
// RedisBloom's INFO and MEMORY USAGE (testdata/oracle/edge.jsonl); with
// --max-filter-bytes 64mb the same reserves are refused before anything is
// allocated: neither the data segment nor the resident set grows, where
// creating the filter grew the data segment by its size.
func TestDefaultCapLargeReserve(t *testing.T) {
	avail := procStatus(t, "/proc/meminfo", "MemAvailable")["MemAvailable"]
	if avail < 4<<30 {
		t.Skipf("the machine has %d MiB available; the test needs 4 GiB to create a 1.13 GB filter", avail>>20)
	}
	vm := func(n *node) map[string]int64 {
		return procStatus(t, fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid), "VmData", "VmRSS")
	}
	do := func(n *node, args ...any) (any, error) { return n.client(2).Do(ctx(t), args...).Result() }

	def := start(t)
	before := vm(def)
	if _, err := do(def, "BF.RESERVE", "bf", "0.000001", "300000000"); err != nil {
		t.Fatalf("default node: BF.RESERVE bf 0.000001 300000000: %v", err)
	}
	grew := vm(def)["VmData"] - before["VmData"]
	if grew < 1<<30 {
		t.Fatalf("creating a 1.13 GB filter grew the data segment by only %d MiB: the refusal check below would prove nothing", grew>>20)
	}
	checks := []struct {
		args []any
		want string
	}{
		{[]any{"BF.INFO", "bf", "SIZE"}, "[1132420232]"},
		{[]any{"BF.ADD", "bf", "x"}, "1"},
		{[]any{"BF.EXISTS", "bf", "x"}, "1"},
		{[]any{"MEMORY", "USAGE", "bf"}, "1132420264"},
		{[]any{"CF.RESERVE", "cf", "1073741824", "BUCKETSIZE", "1"}, "OK"},
		{[]any{"MEMORY", "USAGE", "cf"}, "1073741912"},
	}
	for _, c := range checks {
		got, err := do(def, c.args...)
		if err != nil || fmt.Sprint(got) != c.want {
			t.Fatalf("default node: %v = %v, %v; want %s", c.args, got, err, c.want)
		}
	}

	// A filter past the image's former 4 GiB load limit, restored from a
	// dump header (a 5 GiB link), survives a restart of the default node.
	if avail >= 12<<30 {
		hdr, _ := hex.DecodeString("01000000000000000100000005000000020000001000000000000000800000000000000001000000000000007b14ae47e17a743fe9862fb2350e2640080000000a0000000000000000")
		enc.LittleEndian.PutUint64(hdr[20:], 5<<30)
		enc.LittleEndian.PutUint64(hdr[28:], 40<<30)
		for _, args := range [][]any{{"DEL", "bf", "cf"}, {"BF.LOADCHUNK", "five", "1", string(hdr)}, {"BF.ADD", "five", "y"}} {
			if _, err := do(def, args...); err != nil {
				t.Fatalf("%v: %v", args[:2], err)
			}
		}
		def.stop()
		// It loads 5 GiB of image before it listens: 15 s was not
		// always enough while the rest of CI ran beside it.
		def.startWait = 2 * time.Minute
		def.launch()
		if got, err := do(def, "BF.EXISTS", "five", "y"); err != nil || fmt.Sprint(got) != "1" {
			t.Fatalf("after a restart the 5 GiB filter answers %v, %v", got, err)
		}
	} else {
		t.Logf("restart of a 5 GiB filter not tried: %d MiB available", avail>>20)
	}

	capped := start(t, "--max-filter-bytes", "64mb")
	before = vm(capped)
	for _, args := range [][]any{
		{"BF.RESERVE", "bf", "0.000001", "300000000"},
		{"CF.RESERVE", "cf", "1073741824", "BUCKETSIZE", "1"},
	} {
		if _, err := do(capped, args...); err == nil || err.Error() != "ERR filter would exceed max-filter-bytes" {
			t.Fatalf("--max-filter-bytes 64mb: %v answered %v", args, err)
		}
	}
	after := vm(capped)
	for _, f := range []string{"VmData", "VmRSS"} {
		if d := after[f] - before[f]; d > 32<<20 {
			t.Errorf("refusing the reserves grew %s by %d MiB", f, d>>20)
		}
	}
	if got, err := do(capped, "EXISTS", "bf", "cf"); err != nil || fmt.Sprint(got) != "0" {
		t.Fatalf("refused filters exist: %v %v", got, err)
	}
}
