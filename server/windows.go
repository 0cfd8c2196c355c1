package server

import (
	"math"
	"strconv"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/resp"
	"github.com/bfserver/bfserver/sketch/window"
)

// Sliding-window filters: bfserver's own commands (BFX.W*), modelled on
// BF.RESERVE/ADD/MADD/INSERT/EXISTS/MEXISTS/INFO/SCANDUMP/LOADCHUNK. A
// window is COUNT n (the last n inserts) or EX seconds / PX milliseconds
// with CAPACITY c (the inserts of the last T, sized for c of them).
// KEEPRATE (time windows) keeps the false-positive rate under the target
// at any rate, at the cost of forgetting early while the rate exceeds
// the capacity. Their ACL categories are Redis's own (@read/@write/@fast),
// not RedisBloom's @bloom: ACL CAT bloom lists exactly what RedisBloom
// lists.
const (
	msgWindowSpec     = "ERR window must be COUNT n, or EX seconds or PX milliseconds with CAPACITY n"
	msgWindowRange    = "ERR window must be 1 to 1099511627776 inserts, or 1 ms to 285 years with a capacity of 1 to 1099511627776"
	msgWindowRate     = "ERR error rate must be in the range [0.000000000001, 0.5]"
	msgWindowKeepRate = "ERR KEEPRATE applies to time windows only"
	msgWindowSizing   = "ERR cannot size a window filter for that error rate and capacity"
)

var (
	catWindowW  = []string{"@write", "@slow"}
	catWindowWF = []string{"@write", "@fast"}
	catWindowR  = []string{"@read", "@fast"}
	catWindowRS = []string{"@read", "@slow"}
)

func registerWindows() {
	wr := []string{"write", "denyoom"}
	rd := []string{"readonly", "fast"}
	own := func(name string, arity int, flags, cats, keyFlags []string,
		parse func(*session, [][]byte) (command.Cmd, string), render func(*resp.Writer, *command.Cmd, *keyspace.Result)) {
		register(&spec{name: name, arity: arity, flags: flags, first: 1, last: 1, step: 1, cats: cats,
			keyFlags: keyFlags, parse: parse, render: render})
	}
	own("bfx.wreserve", -5, wr, catWindowW, kRW, parseWReserve, renderOK)
	own("bfx.wadd", 3, wr, catWindowWF, kRW, parseWAdd(false), renderBools)
	own("bfx.wmadd", -3, wr, catWindowWF, kRW, parseWAdd(true), renderBools)
	own("bfx.winsert", -4, wr, catWindowW, kRW, parseWInsert, renderBools)
	own("bfx.wexists", 3, rd, catWindowR, kRO, parseWExists(false), renderBools)
	own("bfx.wmexists", -3, rd, catWindowR, kRO, parseWExists(true), renderBools)
	own("bfx.winfo", 2, []string{"readonly"}, catWindowRS, kRO, parseKeyOnly(command.WInfo), renderWInfo)
	own("bfx.wscandump", 3, []string{"readonly"}, catWindowRS, kRO, parseWScanDump, renderScanDump)
	own("bfx.wloadchunk", 4, wr, catWindowW, kRW, parseWLoadChunk, renderOK)
}

// windowSpec parses a window at args[i:] (COUNT n | EX s CAPACITY c | PX
// ms CAPACITY c) into c, and returns the arguments it took.
func windowSpec(c *command.Cmd, args [][]byte, i int) (int, string) {
	if i+1 >= len(args) {
		return 0, msgWindowSpec
	}
	n, ok := redisnum.ParseLL(args[i+1])
	if !ok {
		return 0, msgNotInteger
	}
	switch ascii.ToUpper(args[i]) {
	case "COUNT":
		if n < 1 || uint64(n) > window.MaxItems {
			return 0, msgWindowRange
		}
		c.Field, c.Iter = uint8(window.Count), n
		return 2, ""
	case "EX", "PX":
		unit := int64(1)
		if lower(args[i], 0) == 'e' {
			unit = 1000
		}
		if n < 1 || n > window.MaxWindowMs/unit {
			return 0, msgWindowRange
		}
		if i+3 >= len(args) || !ascii.EqualFold(args[i+2], "CAPACITY") {
			return 0, msgWindowSpec
		}
		capa, ok := redisnum.ParseLL(args[i+3])
		if !ok {
			return 0, msgNotInteger
		}
		if capa < 1 || uint64(capa) > window.MaxItems {
			return 0, msgWindowRange
		}
		c.Field, c.Iter, c.Capacity = uint8(window.Time), n*unit, uint64(capa)
		return 4, ""
	}
	return 0, msgWindowSpec
}

// sizeWindow sizes the window at the proposer and carries the shape in
// the command (command.EncodeShape), so that every replica builds the same
// filter without sizing it.
func sizeWindow(c *command.Cmd) string {
	if c.Flag && window.Kind(c.Field) != window.Time {
		return msgWindowKeepRate
	}
	n := c.Capacity
	if window.Kind(c.Field) == window.Count {
		n = uint64(c.Iter)
	}
	s, err := window.Size(c.ErrorRate, n)
	if err != nil {
		return msgWindowSizing
	}
	c.Data = command.EncodeShape(s)
	return ""
}

func parseWindowRate(b []byte) (float64, string) {
	er, ok := redisnum.ParseDouble(b)
	if !ok {
		return 0, msgBadErrorRate
	}
	if !(er >= window.MinErrorRate && er <= window.MaxErrorRate) {
		return 0, msgWindowRate
	}
	return er, ""
}

// parseWReserve: BFX.WRESERVE key error_rate window [KEEPRATE].
func parseWReserve(s *session, args [][]byte) (command.Cmd, string) {
	c := command.Cmd{Op: command.WReserve, Key: args[1]}
	var msg string
	if c.ErrorRate, msg = parseWindowRate(args[2]); msg != "" {
		return c, msg
	}
	n, msg := windowSpec(&c, args, 3)
	if msg != "" {
		return c, msg
	}
	switch rest := args[3+n:]; {
	case len(rest) == 1 && ascii.EqualFold(rest[0], "KEEPRATE"):
		c.Flag = true
	case len(rest) != 0:
		return c, msgSyntax
	}
	return c, sizeWindow(&c)
}

func parseWAdd(multi bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: command.WAdd, Key: args[1], Items: args[2:], Multi: multi, NoCreate: true}, ""
	}
}

// parseWInsert: BFX.WINSERT key [ERROR rate] [window [KEEPRATE]]
// [NOCREATE] ITEMS item...; without a window it adds to an existing
// filter only (there is no default window).
func parseWInsert(s *session, args [][]byte) (command.Cmd, string) {
	c := command.Cmd{Op: command.WAdd, Key: args[1], Multi: true, ErrorRate: 0.01}
	hasWindow := false
	for i := 2; i < len(args); {
		switch ascii.ToUpper(args[i]) {
		case "ITEMS":
			c.Items = args[i+1:]
			if len(c.Items) == 0 {
				return c, arityError("bfx.winsert")
			}
			if c.NoCreate || !hasWindow {
				c.NoCreate, c.ErrorRate, c.Field, c.Iter, c.Capacity, c.Flag = true, 0, 0, 0, 0, false
				return c, ""
			}
			return c, sizeWindow(&c)
		case "ERROR":
			if i+1 >= len(args) {
				return c, msgSyntax
			}
			var msg string
			if c.ErrorRate, msg = parseWindowRate(args[i+1]); msg != "" {
				return c, msg
			}
			i += 2
		case "COUNT", "EX", "PX":
			n, msg := windowSpec(&c, args, i)
			if msg != "" {
				return c, msg
			}
			hasWindow = true
			i += n
		case "KEEPRATE":
			c.Flag = true
			i++
		case "NOCREATE":
			c.NoCreate = true
			i++
		default:
			return c, msgSyntax
		}
	}
	return c, arityError("bfx.winsert") // no ITEMS
}

func parseWExists(multi bool) func(*session, [][]byte) (command.Cmd, string) {
	return func(s *session, args [][]byte) (command.Cmd, string) {
		return command.Cmd{Op: command.WExists, Key: args[1], Items: args[2:], Multi: multi}, ""
	}
}

// parseWScanDump: BFX.WSCANDUMP key iterator: 0 gives the header, then
// chunks of up to 16 MB.
func parseWScanDump(s *session, args [][]byte) (command.Cmd, string) {
	it, ok := redisnum.ParseLL(args[2])
	if !ok || it < 0 {
		return command.Cmd{}, msgInvalidPosition
	}
	return command.Cmd{Op: command.WScanDump, Key: args[1], Iter: it, Count: window.MaxChunk}, ""
}

// renderWInfo writes BFX.WINFO's pairs: a map in RESP3, a flat array in
// RESP2 (as BF.INFO), each value by its field's type.
func renderWInfo(w *resp.Writer, c *command.Cmd, r *keyspace.Result) {
	n := len(r.List()) / 2
	if w.Proto == 3 {
		w.Map(n)
	} else {
		w.Array(2 * n)
	}
	for i := 0; i+1 < len(r.List()); i += 2 {
		name, val := string(r.List()[i]), r.List()[i+1]
		w.Simple(name)
		switch {
		case name == "Window type" || name == "Overflow":
			w.Simple(string(val))
		case keyspace.WindowInfoDouble(name):
			f, _ := strconv.ParseFloat(string(val), 64)
			w.Double(f)
		default:
			v, _ := strconv.ParseUint(string(val), 10, 64)
			w.Int(int64(min(v, math.MaxInt64)))
		}
	}
}

// parseWLoadChunk: BFX.WLOADCHUNK key iterator data, the iterator as
// BFX.WSCANDUMP returned it with data (1 for the header).
func parseWLoadChunk(s *session, args [][]byte) (command.Cmd, string) {
	it, ok := redisnum.ParseLL(args[2])
	if !ok || it < 1 {
		return command.Cmd{}, msgInvalidPosition
	}
	return command.Cmd{Op: command.WLoadChunk, Key: args[1], Iter: it, Data: args[3]}, ""
}
