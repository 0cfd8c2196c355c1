package resp

import "testing"

// TestDoubleForm: doubles are written as Redis's fpconv writes them,
// without an exponent (ACL LOG's age-seconds).
func TestDoubleForm(t *testing.T) {
	for _, c := range []struct {
		d     float64
		proto int
		want  string
	}{{1000000.5, 2, "$9\r\n1000000.5\r\n"}, {0.25, 3, ",0.25\r\n"}, {12, 3, ",12\r\n"}} {
		w := Writer{Proto: c.proto}
		w.Double(c.d)
		if string(w.Buf) != c.want {
			t.Errorf("Double(%v) RESP%d = %q, want %q", c.d, c.proto, w.Buf, c.want)
		}
	}
}
