package resp

import "testing"

// TestFpconv: doubles as RedisModule_ReplyWithDouble writes them on Redis
// 8 (fpconv_dtoa), captured from the reference server's TOPK.INFO decay.
func TestFpconv(t *testing.T) {
	for in, want := range map[float64]string{
		0.00012345: "1.2345e-4", 1e-7: "1e-7", 0.000001: "0.000001", 0.0000012: "1.2e-6",
		0.123456789012345678: "0.12345678901234568", 0.3333333333333333: "0.3333333333333333",
		2.5e-5: "0.000025", 0.0001: "0.0001", 1: "1", 0.9: "0.9", 1e-300: "1e-300",
	} {
		if got := fpconv(in); got != want {
			t.Errorf("fpconv(%v) = %q, want %q", in, got, want)
		}
	}
}
