package resp

import (
	"math"
	"strconv"
	"strings"
)

// Writer appends replies to a buffer in the connection's protocol (2 or 3).
// RESP3-only types degrade to their RESP2 forms as Redis does: maps become
// flat arrays, sets arrays, booleans integers, nulls $-1.
//
// The caller owns Buf: it sends it and resets it, or cuts it back to drop
// replies. Proto is 2 or 3.
type Writer struct {
	Buf   []byte
	Proto int
}

func (w *Writer) header(prefix byte, n int64) {
	w.Buf = append(w.Buf, prefix)
	w.Buf = strconv.AppendInt(w.Buf, n, 10)
	w.Buf = append(w.Buf, '\r', '\n')
}

// Simple writes +s.
func (w *Writer) Simple(s string) {
	w.Buf = append(w.Buf, '+')
	w.Buf = append(w.Buf, s...)
	w.Buf = append(w.Buf, '\r', '\n')
}

// Error writes -msg verbatim (RedisBloom errors carry no ERR prefix).
func (w *Writer) Error(msg string) {
	w.Buf = append(w.Buf, '-')
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c != '\r' && c != '\n' {
			w.Buf = append(w.Buf, c)
		} else {
			w.Buf = append(w.Buf, ' ')
		}
	}
	w.Buf = append(w.Buf, '\r', '\n')
}

// Int writes :n.
func (w *Writer) Int(n int64) { w.header(':', n) }

// Bulk writes $len data.
func (w *Writer) Bulk(b []byte) {
	w.header('$', int64(len(b)))
	w.Buf = append(w.Buf, b...)
	w.Buf = append(w.Buf, '\r', '\n')
}

// BulkString writes a string as bulk.
func (w *Writer) BulkString(s string) {
	w.header('$', int64(len(s)))
	w.Buf = append(w.Buf, s...)
	w.Buf = append(w.Buf, '\r', '\n')
}

// Null writes $-1 or _.
func (w *Writer) Null() {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, '_', '\r', '\n')
	} else {
		w.Buf = append(w.Buf, "$-1\r\n"...)
	}
}

// NullArray writes *-1 or _.
func (w *Writer) NullArray() {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, '_', '\r', '\n')
	} else {
		w.Buf = append(w.Buf, "*-1\r\n"...)
	}
}

// Bool writes #t/#f in RESP3 and :1/:0 in RESP2.
func (w *Writer) Bool(b bool) {
	switch {
	case w.Proto == 3 && b:
		w.Buf = append(w.Buf, "#t\r\n"...)
	case w.Proto == 3:
		w.Buf = append(w.Buf, "#f\r\n"...)
	case b:
		w.Buf = append(w.Buf, ":1\r\n"...)
	default:
		w.Buf = append(w.Buf, ":0\r\n"...)
	}
}

// Array writes *n.
func (w *Writer) Array(n int) { w.header('*', int64(n)) }

// Map writes %n in RESP3 and *2n in RESP2.
func (w *Writer) Map(n int) {
	if w.Proto == 3 {
		w.header('%', int64(n))
	} else {
		w.header('*', int64(2*n))
	}
}

// Set writes ~n in RESP3 and *n in RESP2.
func (w *Writer) Set(n int) {
	if w.Proto == 3 {
		w.header('~', int64(n))
	} else {
		w.header('*', int64(n))
	}
}

// Verbatim writes a verbatim text string in RESP3 and a bulk in RESP2.
func (w *Writer) Verbatim(s string) {
	if w.Proto != 3 {
		w.BulkString(s)
		return
	}
	w.header('=', int64(len(s)+4))
	w.Buf = append(w.Buf, "txt:"...)
	w.Buf = append(w.Buf, s...)
	w.Buf = append(w.Buf, '\r', '\n')
}

// ModuleDouble writes a double as RedisModule_ReplyWithDouble does on
// Redis 7.2 and later (addReplyDouble, fpconv_dtoa): the shortest digits
// that read back exactly, in plain notation when the decimal exponent is
// small (an integer of at most 7 padding zeros, a fraction down to 10^-6
// or with at most 3 places before the point), else d.ddde±X; a bulk
// string in RESP2, a double in RESP3.
func (w *Writer) ModuleDouble(d float64) {
	s := fpconv(d)
	if w.Proto == 3 {
		w.Buf = append(w.Buf, ',')
		w.Buf = append(w.Buf, s...)
		w.Buf = append(w.Buf, '\r', '\n')
		return
	}
	w.BulkString(s)
}

// fpconv is fpconv_dtoa's text of d.
func fpconv(d float64) string {
	switch {
	case math.IsNaN(d):
		return "nan"
	case math.IsInf(d, 1):
		return "inf"
	case math.IsInf(d, -1):
		return "-inf"
	case d == 0:
		if math.Signbit(d) {
			return "-0"
		}
		return "0"
	}
	neg := d < 0
	e := strconv.FormatFloat(math.Abs(d), 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	nd := len(digits)
	k := x - nd + 1 // d = digits × 10^k
	var out string
	absExp := x
	if absExp < 0 {
		absExp = -absExp
	}
	switch {
	case k >= 0 && absExp < nd+7:
		out = digits + strings.Repeat("0", k)
	case k < 0 && (k > -7 || absExp < 4):
		if off := nd + k; off <= 0 {
			out = "0." + strings.Repeat("0", -off) + digits
		} else {
			out = digits[:off] + "." + digits[off:]
		}
	default:
		if neg {
			digits = digits[:min(nd, 17)]
		} else {
			digits = digits[:min(nd, 18)]
		}
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if x < 0 {
			sign = "-"
		}
		out += "e" + sign + strconv.Itoa(absExp)
	}
	if neg {
		out = "-" + out
	}
	return out
}

// Double writes a double: ,d in RESP3, a bulk string in RESP2, in the
// shortest form that reads back the same and without an exponent, as
// Redis's fpconv writes the values it is used for (ACL LOG's age-seconds:
// 1000000.5, where Go's %g would say 1.0000005e+06).
func (w *Writer) Double(d float64) {
	s := strconv.FormatFloat(d, 'f', -1, 64)
	if w.Proto == 3 {
		w.Buf = append(w.Buf, ',')
		w.Buf = append(w.Buf, s...)
		w.Buf = append(w.Buf, '\r', '\n')
		return
	}
	w.BulkString(s)
}
