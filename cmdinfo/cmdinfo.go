// Package cmdinfo is what clients and ACL rules know of each command: the
// COMMAND INFO and COMMAND DOCS entries Redis 8 with RedisBloom 8.8.0
// gives (captured from it: tables_gen.go, written by internal/gendocs),
// those of bfserver's own commands (own.go), and what follows from them
// (where a command's keys are). A server describes each command it
// registers (Describe) and serves the result; it holds no state.
package cmdinfo

//go:generate sh -c "cd .. && go run ./internal/gendocs"

import (
	"slices"
	"strings"

	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/internal/redisnum"
	"github.com/bfserver/bfserver/resp"
)

// Info is a COMMAND INFO entry but its subcommands, which come from what
// the server registers.
type Info struct {
	Arity             int
	Flags             []string
	First, Last, Step int
	Categories, Tips  []string
	KeySpecs          []KeySpec
}

// KeySpec is a key specification: begin_search by index, find_keys by
// range or, with KeyNum, by a count of keys (TDIGEST.MERGE's sources:
// the count at Index+KeyNumIdx, the first key at Index+FirstKey).
type KeySpec struct {
	Notes                   string
	Flags                   []string
	Index                   int
	LastKey, KeyStep, Limit int
	KeyNum                  bool
	KeyNumIdx, FirstKey     int
}

// Doc is a COMMAND DOCS entry. Empty fields are left out of the reply, as
// Redis leaves out what a command does not declare.
type Doc struct {
	Summary, Since, Group, Complexity, Module string
	DocFlags                                  []string
	DeprecatedSince, ReplacedBy               string
	History                                   [][2]string // (version, description)
	Args                                      []Arg
}

// Arg is one node of a command's argument tree.
type Arg struct {
	Name, Type, Display string
	KeySpec             int // key_spec_index + 1; 0 when the argument is not a key
	Token, Summary      string
	Since               string
	DeprecatedSince     string
	Flags               []string // optional, multiple, multiple_token
	Args                []Arg    // of a block or oneof
}

// Declared is what a server says of a command it registers; it describes
// the command where Redis has no entry for it.
type Declared struct {
	// Full is the name, or parent|name for a subcommand, lower case.
	Full              string
	Arity             int
	Flags             []string
	First, Last, Step int
	Categories        []string
	// KeyFlags are the key spec's flags (RW, RO, access, update, …) of a
	// command with keys at First..Last.
	KeyFlags []string
	// Module: a command of RedisBloom's (group "module", module "bf").
	Module bool
}

// Command is one command or subcommand as served.
type Command struct {
	Full string
	Info *Info
	Doc  *Doc
	// Captured: Redis has an INFO entry for the command (Info is it).
	Captured bool
	// Subs are the subcommands, in name order.
	Subs []*Command
}

// Describe is a command's entries: Redis's, or bfserver's own, or built
// from what the server declares. subs are its subcommands, described.
func Describe(d Declared, subs []*Command) *Command {
	c := &Command{Full: d.Full, Subs: slices.Clone(subs)}
	slices.SortFunc(c.Subs, func(a, b *Command) int { return strings.Compare(a.Full, b.Full) })
	if in := infoTable[d.Full]; in != nil {
		c.Info, c.Captured = in, true
	} else {
		in := &Info{Arity: d.Arity, Flags: d.Flags, First: d.First, Last: d.Last, Step: d.Step, Categories: d.Categories}
		if d.Module || d.First > 0 {
			lastKey := d.Last - d.First
			if d.Last < 0 {
				lastKey = d.Last
			}
			in.KeySpecs = []KeySpec{{Flags: d.KeyFlags, Index: d.First, LastKey: lastKey, KeyStep: max(d.Step, 1)}}
		}
		c.Info = in
	}
	switch {
	case docTable[d.Full] != nil:
		c.Doc = docTable[d.Full]
	case ownDocs[d.Full] != nil:
		c.Doc = ownDocs[d.Full]
	default:
		c.Doc = &Doc{Summary: summaryOf(d.Full), Since: "1.0.0", Group: "generic"}
		if d.Module {
			c.Doc.Group, c.Doc.Module = "module", "bf"
		}
	}
	return c
}

func summaryOf(full string) string {
	up := []byte(full)
	for i, c := range up {
		if c >= 'a' && c <= 'z' {
			up[i] = c - 'a' + 'A'
		} else if c == '|' {
			up[i] = ' '
		}
	}
	return string(up) + " command"
}

// WriteDoc renders the command's COMMAND DOCS entry (the value; the
// caller writes the name), subcommands included.
func (c *Command) WriteDoc(w *resp.Writer) {
	d := c.Doc
	n := 1
	for _, s := range []string{d.Summary, d.Since, d.Complexity, d.Module, d.DeprecatedSince, d.ReplacedBy} {
		if s != "" {
			n++
		}
	}
	for _, l := range []int{len(d.DocFlags), len(d.History), len(d.Args), len(c.Subs)} {
		if l > 0 {
			n++
		}
	}
	w.Map(n)
	str := func(k, v string) {
		if v != "" {
			w.BulkString(k)
			w.BulkString(v)
		}
	}
	str("summary", d.Summary)
	str("since", d.Since)
	str("group", d.Group)
	str("complexity", d.Complexity)
	str("module", d.Module)
	if len(d.DocFlags) > 0 {
		w.BulkString("doc_flags")
		writeSimpleSet(w, d.DocFlags)
	}
	str("deprecated_since", d.DeprecatedSince)
	str("replaced_by", d.ReplacedBy)
	if len(d.History) > 0 {
		w.BulkString("history")
		w.Set(len(d.History))
		for _, h := range d.History {
			w.Array(2)
			w.BulkString(h[0])
			w.BulkString(h[1])
		}
	}
	if len(d.Args) > 0 {
		w.BulkString("arguments")
		writeArgs(w, d.Args)
	}
	if len(c.Subs) > 0 {
		w.BulkString("subcommands")
		w.Map(len(c.Subs))
		for _, sub := range c.Subs {
			w.BulkString(sub.Full)
			sub.WriteDoc(w)
		}
	}
}

func writeArgs(w *resp.Writer, args []Arg) {
	w.Array(len(args))
	for i := range args {
		a := &args[i]
		n := 2
		for _, s := range []string{a.Display, a.Token, a.Summary, a.Since, a.DeprecatedSince} {
			if s != "" {
				n++
			}
		}
		if a.KeySpec > 0 {
			n++
		}
		if len(a.Flags) > 0 {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.Name)
		w.BulkString("type")
		w.BulkString(a.Type)
		str := func(k, v string) {
			if v != "" {
				w.BulkString(k)
				w.BulkString(v)
			}
		}
		str("display_text", a.Display)
		if a.KeySpec > 0 {
			w.BulkString("key_spec_index")
			w.Int(int64(a.KeySpec - 1))
		}
		str("token", a.Token)
		str("summary", a.Summary)
		str("since", a.Since)
		str("deprecated_since", a.DeprecatedSince)
		if len(a.Flags) > 0 {
			w.BulkString("flags")
			writeSimpleSet(w, a.Flags)
		}
		if len(a.Args) > 0 {
			w.BulkString("arguments")
			writeArgs(w, a.Args)
		}
	}
}

// writeSimpleSet writes a set of simple strings (flags, categories).
func writeSimpleSet(w *resp.Writer, l []string) {
	w.Set(len(l))
	for _, s := range l {
		w.Simple(s)
	}
}

// WriteFlags writes a set of flags as COMMAND INFO and GETKEYSANDFLAGS
// do: simple strings.
func WriteFlags(w *resp.Writer, l []string) { writeSimpleSet(w, l) }

// WriteInfo renders the command's COMMAND INFO entry.
func (c *Command) WriteInfo(w *resp.Writer) {
	in := c.Info
	w.Array(10)
	w.BulkString(c.Full)
	w.Int(int64(in.Arity))
	writeSimpleSet(w, in.Flags)
	w.Int(int64(in.First))
	w.Int(int64(in.Last))
	w.Int(int64(in.Step))
	writeSimpleSet(w, in.Categories)
	w.Set(len(in.Tips))
	for _, t := range in.Tips {
		w.BulkString(t)
	}
	w.Set(len(in.KeySpecs))
	for i := range in.KeySpecs {
		ks := &in.KeySpecs[i]
		if ks.Notes != "" {
			w.Map(4)
			w.BulkString("notes")
			w.BulkString(ks.Notes)
		} else {
			w.Map(3)
		}
		w.BulkString("flags")
		writeSimpleSet(w, ks.Flags)
		w.BulkString("begin_search")
		w.Map(2)
		w.BulkString("type")
		w.BulkString("index")
		w.BulkString("spec")
		w.Map(1)
		w.BulkString("index")
		w.Int(int64(ks.Index))
		w.BulkString("find_keys")
		w.Map(2)
		w.BulkString("type")
		if ks.KeyNum {
			w.BulkString("keynum")
			w.BulkString("spec")
			w.Map(3)
			w.BulkString("keynumidx")
			w.Int(int64(ks.KeyNumIdx))
			w.BulkString("firstkey")
			w.Int(int64(ks.FirstKey))
			w.BulkString("keystep")
			w.Int(int64(ks.KeyStep))
			continue
		}
		w.BulkString("range")
		w.BulkString("spec")
		w.Map(3)
		w.BulkString("lastkey")
		w.Int(int64(ks.LastKey))
		w.BulkString("keystep")
		w.Int(int64(ks.KeyStep))
		w.BulkString("limit")
		w.Int(int64(ks.Limit))
	}
	// Redis writes an empty set for a command without subcommands but an
	// array for a container's (addReplyCommandSubCommands).
	if len(c.Subs) == 0 {
		w.Set(0)
		return
	}
	w.Array(len(c.Subs))
	for _, sub := range c.Subs {
		sub.WriteInfo(w)
	}
}

// Keys finds the command's keys in args from its key specs, as Redis's
// getKeysUsingKeySpecs does for begin_search index / find_keys range or
// keynum specs: their positions and each one's flags; none when a spec
// does not fit the arguments.
func (c *Command) Keys(args [][]byte) ([]int, [][]string) {
	var pos []int
	var flags [][]string
	argc := len(args)
	for _, ks := range c.Info.KeySpecs {
		first := ks.Index
		var last int
		switch {
		case ks.KeyNum:
			at := first + ks.KeyNumIdx
			if at >= argc {
				return nil, nil
			}
			n, ok := redisnum.ParseLL(args[at])
			if !ok || n < 0 || n > int64(argc) {
				return nil, nil
			}
			first += ks.FirstKey
			last = first + int(n) - 1
		case ks.LastKey >= 0:
			last = first + ks.LastKey
		case ks.Limit == 0:
			last = argc + ks.LastKey
		default:
			last = first + ((argc-first)/ks.Limit + ks.LastKey)
		}
		if last >= argc || last < first || first >= argc {
			return nil, nil
		}
		for i := first; i <= last; i += max(ks.KeyStep, 1) {
			pos = append(pos, i)
			flags = append(flags, c.keyFlagsAt(ks, args))
		}
	}
	return pos, flags
}

// keyFlagsAt is a key's flags. SET's spec has variable flags: Redis's
// setGetKeys reports RW access update with GET, OW update without.
func (c *Command) keyFlagsAt(ks KeySpec, args [][]byte) []string {
	if c.Full != "set" {
		return ks.Flags
	}
	for _, a := range args[min(3, len(args)):] {
		if ascii.EqualFold(a, "get") {
			return []string{"RW", "access", "update"}
		}
	}
	return []string{"OW", "update"}
}

// Captured describes every command Redis has an entry for, subcommands
// included, in name order: a table for tools and tests that need Redis's
// commands without a server's.
func Captured() []*Command {
	var out []*Command
	for _, name := range sortedNames() {
		if strings.Contains(name, "|") {
			continue
		}
		var subs []*Command
		for _, sub := range sortedNames() {
			if strings.HasPrefix(sub, name+"|") {
				subs = append(subs, Describe(Declared{Full: sub}, nil))
			}
		}
		out = append(out, Describe(Declared{Full: name}, subs))
	}
	return out
}

func sortedNames() []string {
	names := make([]string, 0, len(infoTable))
	for n := range infoTable {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
