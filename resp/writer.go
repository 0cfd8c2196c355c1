package resp

import (
	"strconv"

	"github.com/bfserver/bfserver/sketch/tdigest"
)

// Writer appends replies to a buffer in the connection's protocol (2 or 3).
// RESP3-only types degrade to their RESP2 forms as Redis does: maps become
// flat arrays, sets arrays, booleans integers, nulls $-1.
type Writer struct {
	buf   []byte
	proto int
}

func (w *Writer) header(prefix byte, n int64) {
	w.buf = append(w.buf, prefix)
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}

// Simple writes +s.
func (w *Writer) Simple(s string) {
	w.buf = append(w.buf, '+')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

// Error writes -msg verbatim (RedisBloom errors carry no ERR prefix).
func (w *Writer) Error(msg string) {
	w.buf = append(w.buf, '-')
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c != '\r' && c != '\n' {
			w.buf = append(w.buf, c)
		} else {
			w.buf = append(w.buf, ' ')
		}
	}
	w.buf = append(w.buf, '\r', '\n')
}

// Int writes :n.
func (w *Writer) Int(n int64) { w.header(':', n) }

// Bulk writes $len data.
func (w *Writer) Bulk(b []byte) {
	w.header('$', int64(len(b)))
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\r', '\n')
}

// BulkString writes a string as bulk.
func (w *Writer) BulkString(s string) {
	w.header('$', int64(len(s)))
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

// Null writes $-1 or _.
func (w *Writer) Null() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
	} else {
		w.buf = append(w.buf, "$-1\r\n"...)
	}
}

// NullArray writes *-1 or _.
func (w *Writer) NullArray() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
	} else {
		w.buf = append(w.buf, "*-1\r\n"...)
	}
}

// Bool writes #t/#f in RESP3 and :1/:0 in RESP2.
func (w *Writer) Bool(b bool) {
	switch {
	case w.proto == 3 && b:
		w.buf = append(w.buf, "#t\r\n"...)
	case w.proto == 3:
		w.buf = append(w.buf, "#f\r\n"...)
	case b:
		w.buf = append(w.buf, ":1\r\n"...)
	default:
		w.buf = append(w.buf, ":0\r\n"...)
	}
}

// Array writes *n.
func (w *Writer) Array(n int) { w.header('*', int64(n)) }

// Map writes %n in RESP3 and *2n in RESP2.
func (w *Writer) Map(n int) {
	if w.proto == 3 {
		w.header('%', int64(n))
	} else {
		w.header('*', int64(2*n))
	}
}

// Set writes ~n in RESP3 and *n in RESP2.
func (w *Writer) Set(n int) {
	if w.proto == 3 {
		w.header('~', int64(n))
	} else {
		w.header('*', int64(n))
	}
}

// Verbatim writes a verbatim text string in RESP3 and a bulk in RESP2.
func (w *Writer) Verbatim(s string) {
	if w.proto != 3 {
		w.BulkString(s)
		return
	}
	w.header('=', int64(len(s)+4))
	w.buf = append(w.buf, "txt:"...)
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

// ModuleDouble writes a double as RedisModule_ReplyWithDouble does on
// Redis 7.2 and later (addReplyDouble's d2string: integers within ±2^62
// as integers, else fpconv_dtoa's Grisu2 digits, plain or d.ddde±X); a
// bulk string in RESP2, a double in RESP3. The formatting is
// tdigest.AppendDouble, the one implementation (TOPK.INFO's decay and
// every TDIGEST double).
func (w *Writer) ModuleDouble(d float64) {
	if w.proto == 3 {
		w.buf = tdigest.AppendRESP3Double(w.buf, d)
		return
	}
	w.buf = tdigest.AppendRESP2Double(w.buf, d)
}

// Double writes a double: ,d in RESP3, a bulk string in RESP2, in the
// shortest form that reads back the same and without an exponent, as
// Redis's fpconv writes the values it is used for (ACL LOG's age-seconds:
// 1000000.5, where Go's %g would say 1.0000005e+06).
func (w *Writer) Double(d float64) {
	s := strconv.FormatFloat(d, 'f', -1, 64)
	if w.proto == 3 {
		w.buf = append(w.buf, ',')
		w.buf = append(w.buf, s...)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.BulkString(s)
}
