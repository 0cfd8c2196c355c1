// Package resp is the Redis protocol on the wire: requests parsed with
// every length checked against limits before it is used, resumable
// across reads (a command that arrives in pieces is parsed once), and
// replies written in RESP2 or RESP3. It holds no server state.
package resp

import (
	"bytes"
	"errors"
	"fmt"
)

// Limits bound what one client may send. Defaults follow Redis.
type Limits struct {
	// MaxBulk is proto-max-bulk-len: the longest argument. Default 512 MiB.
	MaxBulk int64
	// MaxArgs is the most arguments in one command. Default 1,048,576.
	MaxArgs int64
	// MaxInline is the longest inline command or header line. Default 64 KiB.
	MaxInline int
	// MaxQueryBuffer caps the unparsed bytes buffered for one client
	// (client-query-buffer-limit). Default 1 GiB.
	MaxQueryBuffer int
}

// Redis's limits for clients that still have to authenticate.
const (
	preAuthMaxArgs = 10
	preAuthMaxBulk = 16384
)

// Validate fills the defaults and refuses limits that contradict each
// other. maxBulk and maxArgs are the most the caller can take further (a
// command carried into a log): limits past them are refused too.
func (l *Limits) Validate(maxBulk, maxArgs int64) error {
	l.ensureDefaults()
	switch {
	case l.MaxBulk > maxBulk:
		return fmt.Errorf("proto-max-bulk-len %d over %d", l.MaxBulk, maxBulk)
	case l.MaxArgs > maxArgs:
		return fmt.Errorf("proto-max-multibulk-len %d over %d", l.MaxArgs, maxArgs)
	case l.MaxInline < 1024:
		return fmt.Errorf("proto-inline-max-size %d under 1024", l.MaxInline)
	case int64(l.MaxQueryBuffer) < l.MaxBulk:
		return fmt.Errorf("client-query-buffer-limit %d under proto-max-bulk-len %d", l.MaxQueryBuffer, l.MaxBulk)
	}
	return nil
}

func (l *Limits) ensureDefaults() {
	if l.MaxBulk <= 0 {
		l.MaxBulk = 512 << 20
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = 1 << 20
	}
	if l.MaxInline <= 0 {
		l.MaxInline = 64 << 10
	}
	if l.MaxQueryBuffer <= 0 {
		l.MaxQueryBuffer = 1 << 30
	}
}

// ProtocolError is a framing error: Redis answers it and closes the
// connection, since the stream can no longer be trusted.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "ERR Protocol error: " + e.Msg }

var (
	errInvalidMultibulk = &ProtocolError{"invalid multibulk length"}
	errInvalidBulk      = &ProtocolError{"invalid bulk length"}
	errBigMbulk         = &ProtocolError{"too big mbulk count string"}
	errBigBulk          = &ProtocolError{"too big bulk count string"}
	errBigInline        = &ProtocolError{"too big inline request"}
	errUnbalanced       = &ProtocolError{"unbalanced quotes in request"}
	errUnauthMultibulk  = &ProtocolError{"unauthenticated multibulk length"}
	errUnauthBulk       = &ProtocolError{"unauthenticated bulk length"}
)

// ErrIncomplete means more bytes are needed.
var ErrIncomplete = errors.New("incomplete")

// Partial is how far parsing got into a multibulk command whose bytes are
// not all there yet, so that the next read resumes there instead of
// parsing the command again from its start (a 4.5 MiB BF.MADD arriving in
// 64 KiB reads was parsed 72 times: CPU quadratic in the command's size).
// Offsets count from the command's first byte, so they hold when the
// session moves the command to the start of its buffer or grows it.
type Partial struct {
	count int64 // arguments announced; 0 when no command is under way
	pos   int   // where the next argument's header starts
	spans []int // start and end of each whole argument so far
}

func (p *Partial) reset() { p.count, p.pos, p.spans = 0, 0, p.spans[:0] }

// ParseCommand parses one command at the start of b. It returns the
// arguments (aliasing b), the bytes consumed, and ErrIncomplete when b holds
// only part of a command. Every length is checked against lim before it is
// trusted, so no input makes it allocate more than the bytes it was given
// plus len(args) headers bounded by MaxArgs. A nil args with n > 0 is an
// empty command to skip (Redis ignores "*0" and blank inline lines).
// p, when not nil, keeps the progress of an incomplete multibulk command
// between calls: the caller passes the same p until the command completes
// or fails, with the command still at the start of b and b only longer.
func ParseCommand(b []byte, lim *Limits, auth bool, args [][]byte, p *Partial) ([][]byte, int, error) {
	if p != nil && p.count > 0 {
		return p.resume(b, lim, auth, args)
	}
	if len(b) == 0 {
		return nil, 0, ErrIncomplete
	}
	if b[0] != '*' {
		return parseInline(b, lim, args)
	}
	line, pos, err := readLine(b, 1, lim, errBigMbulk)
	if err != nil {
		return nil, 0, err
	}
	count, ok := ParseInt(line)
	if !ok || count > int64(lim.MaxArgs) {
		return nil, 0, errInvalidMultibulk
	}
	if count <= 0 {
		return nil, pos, nil
	}
	if !auth && count > preAuthMaxArgs {
		return nil, 0, errUnauthMultibulk
	}
	// Each argument takes at least 4 bytes ("$0\r\n" + "\r\n" = 6); do not
	// size args beyond what the buffer could hold yet.
	args = args[:0]
	first := pos
	// The loop is parseBulk written out: a call per argument cost 12 ns a
	// command (16%) on the read path.
	for i := int64(0); i < count; i++ {
		if pos >= len(b) {
			return nil, 0, p.begin(count, first)
		}
		if b[pos] != '$' {
			return nil, 0, &ProtocolError{"expected '$', got '" + string(b[pos]) + "'"}
		}
		line, next, err := readLine(b, pos+1, lim, errBigBulk)
		if err == ErrIncomplete {
			return nil, 0, p.begin(count, first)
		}
		if err != nil {
			return nil, 0, err
		}
		n, ok := ParseInt(line)
		if !ok || n < 0 || n > lim.MaxBulk {
			return nil, 0, errInvalidBulk
		}
		if !auth && n > preAuthMaxBulk {
			return nil, 0, errUnauthBulk
		}
		if int64(len(b)-next) < n+2 {
			return nil, 0, p.begin(count, first)
		}
		end := next + int(n)
		if b[end] != '\r' || b[end+1] != '\n' {
			return nil, 0, &ProtocolError{"invalid bulk length"}
		}
		args = append(args, b[next:end:end])
		pos = end + 2
	}
	return args, pos, nil
}

// begin records a command found incomplete by its first parse, when p is
// kept: the next call walks its arguments once more from the first,
// keeping where they are, and from then on each call goes on from where
// the previous one stopped.
func (p *Partial) begin(count int64, first int) error {
	if p != nil {
		p.count, p.pos, p.spans = count, first, p.spans[:0]
	}
	return ErrIncomplete
}

// resume goes on with the command p describes, at the start of b.
func (p *Partial) resume(b []byte, lim *Limits, auth bool, args [][]byte) ([][]byte, int, error) {
	pos := p.pos
	for i := int64(len(p.spans) / 2); i < p.count; i++ {
		start, end, next, err := parseBulk(b, pos, lim, auth)
		if err == ErrIncomplete {
			p.pos = pos
			return nil, 0, err
		}
		if err != nil {
			p.reset()
			return nil, 0, err
		}
		p.spans = append(p.spans, start, end)
		pos = next
	}
	args = args[:0]
	for i := 0; i < len(p.spans); i += 2 {
		args = append(args, b[p.spans[i]:p.spans[i+1]:p.spans[i+1]])
	}
	p.reset()
	return args, pos, nil
}

// parseBulk reads the bulk string whose header starts at b[pos]: its
// bytes are b[start:end], and next is where the following one starts.
func parseBulk(b []byte, pos int, lim *Limits, auth bool) (start, end, next int, err error) {
	if pos >= len(b) {
		return 0, 0, 0, ErrIncomplete
	}
	if b[pos] != '$' {
		return 0, 0, 0, &ProtocolError{"expected '$', got '" + string(b[pos]) + "'"}
	}
	line, start, err := readLine(b, pos+1, lim, errBigBulk)
	if err != nil {
		return 0, 0, 0, err
	}
	n, ok := ParseInt(line)
	if !ok || n < 0 || n > lim.MaxBulk {
		return 0, 0, 0, errInvalidBulk
	}
	if !auth && n > preAuthMaxBulk {
		return 0, 0, 0, errUnauthBulk
	}
	if int64(len(b)-start) < n+2 {
		return 0, 0, 0, ErrIncomplete
	}
	end = start + int(n)
	if b[end] != '\r' || b[end+1] != '\n' {
		return 0, 0, 0, &ProtocolError{"invalid bulk length"}
	}
	return start, end, end + 2, nil
}

// Needed is how many bytes the multibulk command at the start of b takes,
// as far as the headers b holds tell: through the end of the first bulk it
// does not hold whole, or 0 when a header is incomplete. A session whose
// buffer is full grows it to this instead of doubling, so a 16 MiB
// argument costs 16 MiB of buffer, not 32.
func Needed(b []byte, lim *Limits) int {
	if len(b) == 0 || b[0] != '*' {
		return 0
	}
	line, pos, err := readLine(b, 1, lim, errBigMbulk)
	if err != nil {
		return 0
	}
	count, ok := ParseInt(line)
	if !ok || count <= 0 {
		return 0
	}
	for i := int64(0); i < count && pos < len(b); i++ {
		line, next, err := readLine(b, pos+1, lim, errBigBulk)
		if err != nil {
			return 0
		}
		n, ok := ParseInt(line)
		if !ok || n < 0 || n > lim.MaxBulk {
			return 0
		}
		pos = next + int(n) + 2
		if pos > len(b) {
			return pos
		}
	}
	return 0
}

// readLine returns the line starting at b[start] up to CRLF.
func readLine(b []byte, start int, lim *Limits, tooBig error) ([]byte, int, error) {
	i := bytes.IndexByte(b[start:], '\r')
	if i < 0 || start+i+1 >= len(b) {
		if len(b)-start > lim.MaxInline {
			return nil, 0, tooBig
		}
		return nil, 0, ErrIncomplete
	}
	if i > lim.MaxInline {
		return nil, 0, tooBig
	}
	if b[start+i+1] != '\n' {
		return nil, 0, errInvalidBulk
	}
	return b[start : start+i], start + i + 2, nil
}

// ParseInt parses the decimal length of a RESP header: an optional '-'
// and at most 18 digits, so it cannot overflow (larger values are refused
// by every limit anyway).
func ParseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

func parseInline(b []byte, lim *Limits, args [][]byte) ([][]byte, int, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > lim.MaxInline {
			return nil, 0, errBigInline
		}
		return nil, 0, ErrIncomplete
	}
	if i > lim.MaxInline {
		return nil, 0, errBigInline
	}
	line := b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	out, ok := SplitArgs(line, args[:0])
	if !ok {
		return nil, 0, errUnbalanced
	}
	if int64(len(out)) > lim.MaxArgs {
		return nil, 0, errInvalidMultibulk
	}
	if len(out) == 0 {
		return nil, i + 1, nil
	}
	return out, i + 1, nil
}

// SplitArgs is Redis's sdssplitargs: words separated by spaces, with
// "double quotes" (and \n \r \t \b \a \\ \" \xHH escapes) and 'single quotes'.
func SplitArgs(line []byte, out [][]byte) ([][]byte, bool) {
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return out, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			if inq {
				if p >= len(line) {
					return nil, false
				}
				switch {
				case line[p] == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					cur = append(cur, hexVal(line[p+2])<<4|hexVal(line[p+3]))
					p += 3
				case line[p] == '\\' && p+1 < len(line):
					p++
					c := line[p]
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				case line[p] == '"':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[p])
				}
			} else if insq {
				if p >= len(line) {
					return nil, false
				}
				switch {
				case line[p] == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case line[p] == '\'':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[p])
				}
			} else {
				if p >= len(line) {
					break
				}
				switch line[p] {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, line[p])
				}
			}
			if p < len(line) {
				p++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		out = append(out, cur)
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f'
}
func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
