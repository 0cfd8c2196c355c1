package resp

import (
	"strconv"

	"github.com/bfserver/bfserver/internal/redisnum"
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
// Redis 7.2 and later (addReplyDouble's d2string: integers within ±2^62
// as integers, else fpconv_dtoa's Grisu2 digits, plain or d.ddde±X); a
// bulk string in RESP2, a double in RESP3. The formatting is
// redisnum.AppendDouble, the one implementation (TOPK.INFO's decay and
// every TDIGEST double).
func (w *Writer) ModuleDouble(d float64) {
	if w.Proto == 3 {
		w.Buf = redisnum.AppendRESP3Double(w.Buf, d)
		return
	}
	w.Buf = redisnum.AppendRESP2Double(w.Buf, d)
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
