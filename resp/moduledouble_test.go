package resp

import (
	"strconv"
	"testing"
)

// TestModuleDouble: doubles as RedisModule_ReplyWithDouble writes them on
// Redis 8 (d2string, fpconv_dtoa), captured from the reference server's
// TOPK.INFO decay, in RESP2 and RESP3.
func TestModuleDouble(t *testing.T) {
	for in, want := range map[float64]string{
		0.00012345: "1.2345e-4", 1e-7: "1e-7", 0.000001: "0.000001", 0.0000012: "1.2e-6",
		0.123456789012345678: "0.12345678901234568", 0.3333333333333333: "0.3333333333333333",
		2.5e-5: "0.000025", 0.0001: "0.0001", 1: "1", 0.9: "0.9", 1e-300: "1e-300",
	} {
		w2, w3 := &Writer{Proto: 2}, &Writer{Proto: 3}
		w2.ModuleDouble(in)
		w3.ModuleDouble(in)
		if got, w := string(w2.Buf), "$"+strconv.Itoa(len(want))+"\r\n"+want+"\r\n"; got != w {
			t.Errorf("RESP2 %v = %q, want %q", in, got, w)
		}
		if got := string(w3.Buf); got != ","+want+"\r\n" {
			t.Errorf("RESP3 %v = %q, want %q", in, got, ","+want+"\r\n")
		}
	}
}
