package server

import "github.com/bfserver/bfserver/resp"

//go:generate sh -c "cd .. && go run ./internal/gendocs"

// The COMMAND DOCS and COMMAND INFO entries Redis gives, for every command
// captured from RedisBloom 8.8.0 on Redis 8.0-m01 (commanddocs_gen.go), and
// the few bfserver-only commands (ownDocs). Entries are keyed by full name:
// "bf.add", "config|get". A command this server registers but neither table
// knows is described from its spec.

// cmdDoc is one COMMAND DOCS entry. Empty fields are left out of the reply,
// as Redis leaves out what a command does not declare.
type cmdDoc struct {
	summary, since, group, complexity, module string
	docFlags                                  []string
	deprecatedSince, replacedBy               string
	history                                   [][2]string // (version, description)
	args                                      []docArg
}

// docArg is one node of a command's argument tree.
type docArg struct {
	name, typ, display string
	keySpec            int // key_spec_index + 1; 0 when the argument is not a key
	token, summary     string
	since              string
	deprecatedSince    string
	flags              []string // optional, multiple, multiple_token
	args               []docArg // of a block or oneof
}

// commandInfo is one COMMAND INFO entry but its subcommands, which come from
// what the server registers.
type commandInfo struct {
	arity             int
	flags             []string
	first, last, step int
	cats, tips        []string
	keySpecs          []keySpec
}

// keySpec is a key specification: begin_search by index, find_keys by range
// (the only kinds the commands here use).
type keySpec struct {
	notes                   string
	flags                   []string
	index                   int
	lastKey, keyStep, limit int
}

// windowArgs is a window: COUNT n, or EX seconds / PX milliseconds with
// CAPACITY n.
var windowArgs = docArg{name: "window", typ: "oneof", args: []docArg{
	{name: "count", typ: "integer", display: "count", token: "COUNT"},
	{name: "time", typ: "block", args: []docArg{
		{name: "unit", typ: "oneof", args: []docArg{
			{name: "seconds", typ: "integer", display: "seconds", token: "EX"},
			{name: "milliseconds", typ: "integer", display: "milliseconds", token: "PX"},
		}},
		{name: "capacity", typ: "integer", display: "capacity", token: "CAPACITY"},
	}},
}}

var (
	docKey     = docArg{name: "key", typ: "key", display: "key", keySpec: 1}
	docItem    = docArg{name: "item", typ: "string", display: "item"}
	docItems   = docArg{name: "item", typ: "string", display: "item", flags: []string{"multiple"}}
	docKeepRat = docArg{name: "keeprate", typ: "pure-token", display: "keeprate", token: "KEEPRATE", flags: []string{"optional"}}
)

// ownDocs describes the commands only bfserver has, in Redis's shape.
var ownDocs = map[string]*cmdDoc{
	"bfx.wreserve": {
		summary:    "Creates a sliding-window Bloom filter: it keeps the last N inserts, or the inserts of the last T",
		since:      "1.0.0",
		group:      "bf",
		complexity: "O(1)",
		args:       []docArg{docKey, {name: "error_rate", typ: "double", display: "error_rate"}, windowArgs, docKeepRat},
	},
	"bfx.wadd": {
		summary: "Adds an item to a sliding-window filter", since: "1.0.0", group: "bf", complexity: "O(k)",
		args: []docArg{docKey, docItem},
	},
	"bfx.wmadd": {
		summary: "Adds one or more items to a sliding-window filter", since: "1.0.0", group: "bf", complexity: "O(k * n), where n is the number of items",
		args: []docArg{docKey, docItems},
	},
	"bfx.winsert": {
		summary: "Adds one or more items to a sliding-window filter, creating it with the given window if it does not exist", since: "1.0.0", group: "bf",
		complexity: "O(k * n), where n is the number of items",
		args: []docArg{docKey,
			{name: "error_rate", typ: "double", display: "error_rate", token: "ERROR", flags: []string{"optional"}},
			{name: "window", typ: "oneof", flags: []string{"optional"}, args: windowArgs.args},
			docKeepRat,
			{name: "nocreate", typ: "pure-token", display: "nocreate", token: "NOCREATE", flags: []string{"optional"}},
			{name: "items", typ: "pure-token", display: "items", token: "ITEMS"},
			docItems},
	},
	"bfx.wexists": {
		summary: "Checks whether an item was added to a sliding-window filter within its window", since: "1.0.0", group: "bf", complexity: "O(k + l)",
		args: []docArg{docKey, docItem},
	},
	"bfx.wmexists": {
		summary: "Checks whether one or more items were added to a sliding-window filter within its window", since: "1.0.0", group: "bf",
		complexity: "O((k + l) * n), where n is the number of items",
		args:       []docArg{docKey, docItems},
	},
	"bfx.winfo": {
		summary: "Returns information about a sliding-window filter: its window, fill, estimated false-positive rate and memory", since: "1.0.0", group: "bf",
		complexity: "O(m), where m is the size of the filter",
		args:       []docArg{docKey},
	},
	"bfx.wscandump": {
		summary: "Begins an incremental save of a sliding-window filter", since: "1.0.0", group: "bf", complexity: "O(n), where n is the capacity",
		args: []docArg{docKey, {name: "iterator", typ: "integer", display: "iterator"}},
	},
	"bfx.wloadchunk": {
		summary: "Restores a sliding-window filter previously saved using BFX.WSCANDUMP", since: "1.0.0", group: "bf", complexity: "O(n), where n is the capacity",
		args: []docArg{docKey, {name: "iterator", typ: "integer", display: "iterator"}, {name: "data", typ: "string", display: "data"}},
	},
	"bfx.digest": {
		summary:    "Returns a digest of the full state of a Bloom or Cuckoo filter as this node holds it",
		since:      "1.0.0",
		group:      "generic",
		complexity: "O(n), where n is the size of the filter",
		args:       []docArg{{name: "key", typ: "key", display: "key", keySpec: 1}},
	},
	"consistency": {
		summary:    "Shows or sets the read consistency of the connection",
		since:      "1.0.0",
		group:      "connection",
		complexity: "O(1)",
		args: []docArg{{name: "level", typ: "oneof", flags: []string{"optional"}, args: []docArg{
			{name: "linearizable", typ: "pure-token", display: "linearizable", token: "LINEARIZABLE"},
			{name: "stale", typ: "pure-token", display: "stale", token: "STALE"},
		}}},
	},
	"bfcluster": {
		summary:    "A container for cluster membership commands",
		since:      "1.0.0",
		group:      "cluster",
		complexity: "Depends on subcommand.",
	},
	"bfcluster|join": {
		summary:    "Adds a node to the cluster",
		since:      "1.0.0",
		group:      "cluster",
		complexity: "O(1)",
		args: []docArg{
			{name: "node-id", typ: "string", display: "node-id"},
			{name: "raft-address", typ: "string", display: "host:port"},
			{name: "resp-address", typ: "string", display: "host:port"},
		},
	},
	"bfcluster|remove": {
		summary:    "Removes a node from the cluster",
		since:      "1.0.0",
		group:      "cluster",
		complexity: "O(1)",
		args:       []docArg{{name: "node-id", typ: "string", display: "node-id"}},
	},
	"bfcluster|members": {
		summary:    "Lists the members of the cluster",
		since:      "1.0.0",
		group:      "cluster",
		complexity: "O(N) where N is the number of members",
	},
}

// docOf is the DOCS entry of a command by full name.
func docOf(full string, sp *spec) *cmdDoc {
	if d := docTable[full]; d != nil {
		return d
	}
	if d := ownDocs[full]; d != nil {
		return d
	}
	d := &cmdDoc{summary: docSummary(full), since: "1.0.0", group: "generic"}
	if sp.module {
		d.group, d.module = "module", "bf"
	}
	return d
}

func docSummary(full string) string {
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

// writeDoc renders one COMMAND DOCS entry (the value; the caller writes the
// name), subcommands included.
func writeDoc(w *resp.Writer, full string, sp *spec) {
	d := docOf(full, sp)
	n := 1
	for _, s := range []string{d.summary, d.since, d.complexity, d.module, d.deprecatedSince, d.replacedBy} {
		if s != "" {
			n++
		}
	}
	for _, l := range []int{len(d.docFlags), len(d.history), len(d.args), len(sp.subs)} {
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
	str("summary", d.summary)
	str("since", d.since)
	str("group", d.group)
	str("complexity", d.complexity)
	str("module", d.module)
	if len(d.docFlags) > 0 {
		w.BulkString("doc_flags")
		writeSimpleSet(w, d.docFlags)
	}
	str("deprecated_since", d.deprecatedSince)
	str("replaced_by", d.replacedBy)
	if len(d.history) > 0 {
		w.BulkString("history")
		w.Set(len(d.history))
		for _, h := range d.history {
			w.Array(2)
			w.BulkString(h[0])
			w.BulkString(h[1])
		}
	}
	if len(d.args) > 0 {
		w.BulkString("arguments")
		writeDocArgs(w, d.args)
	}
	if len(sp.subs) > 0 {
		w.BulkString("subcommands")
		w.Map(len(sp.subs))
		for _, name := range sortedKeys(sp.subs) {
			w.BulkString(full + "|" + name)
			writeDoc(w, full+"|"+name, sp.subs[name])
		}
	}
}

func writeDocArgs(w *resp.Writer, args []docArg) {
	w.Array(len(args))
	for i := range args {
		a := &args[i]
		n := 2
		for _, s := range []string{a.display, a.token, a.summary, a.since, a.deprecatedSince} {
			if s != "" {
				n++
			}
		}
		if a.keySpec > 0 {
			n++
		}
		if len(a.flags) > 0 {
			n++
		}
		if len(a.args) > 0 {
			n++
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.name)
		w.BulkString("type")
		w.BulkString(a.typ)
		str := func(k, v string) {
			if v != "" {
				w.BulkString(k)
				w.BulkString(v)
			}
		}
		str("display_text", a.display)
		if a.keySpec > 0 {
			w.BulkString("key_spec_index")
			w.Int(int64(a.keySpec - 1))
		}
		str("token", a.token)
		str("summary", a.summary)
		str("since", a.since)
		str("deprecated_since", a.deprecatedSince)
		if len(a.flags) > 0 {
			w.BulkString("flags")
			writeSimpleSet(w, a.flags)
		}
		if len(a.args) > 0 {
			w.BulkString("arguments")
			writeDocArgs(w, a.args)
		}
	}
}

func writeSimpleSet(w *resp.Writer, l []string) {
	w.Set(len(l))
	for _, s := range l {
		w.Simple(s)
	}
}

// infoOf is the INFO entry of a command by full name, from the captured
// table or, for a command Redis does not have, from its spec.
func infoOf(full string, sp *spec) *commandInfo {
	if in := infoTable[full]; in != nil {
		return in
	}
	in := &commandInfo{arity: sp.arity, flags: sp.flags, first: sp.first, last: sp.last, step: sp.step, cats: sp.cats}
	if sp.module || sp.first > 0 {
		lastKey := sp.last - sp.first
		if sp.last < 0 {
			lastKey = sp.last
		}
		in.keySpecs = []keySpec{{flags: sp.keyFlags, index: sp.first, lastKey: lastKey, keyStep: max(sp.step, 1)}}
	}
	return in
}

// writeInfo renders one COMMAND INFO entry under its full name.
func (sp *spec) writeInfo(w *resp.Writer, full string) {
	in := infoOf(full, sp)
	w.Array(10)
	w.BulkString(full)
	w.Int(int64(in.arity))
	writeSimpleSet(w, in.flags)
	w.Int(int64(in.first))
	w.Int(int64(in.last))
	w.Int(int64(in.step))
	writeSimpleSet(w, in.cats)
	w.Set(len(in.tips))
	for _, t := range in.tips {
		w.BulkString(t)
	}
	w.Set(len(in.keySpecs))
	for i := range in.keySpecs {
		ks := &in.keySpecs[i]
		if ks.notes != "" {
			w.Map(4)
			w.BulkString("notes")
			w.BulkString(ks.notes)
		} else {
			w.Map(3)
		}
		w.BulkString("flags")
		writeSimpleSet(w, ks.flags)
		w.BulkString("begin_search")
		w.Map(2)
		w.BulkString("type")
		w.BulkString("index")
		w.BulkString("spec")
		w.Map(1)
		w.BulkString("index")
		w.Int(int64(ks.index))
		w.BulkString("find_keys")
		w.Map(2)
		w.BulkString("type")
		w.BulkString("range")
		w.BulkString("spec")
		w.Map(3)
		w.BulkString("lastkey")
		w.Int(int64(ks.lastKey))
		w.BulkString("keystep")
		w.Int(int64(ks.keyStep))
		w.BulkString("limit")
		w.Int(int64(ks.limit))
	}
	// Redis writes an empty set for a command without subcommands but an
	// array for a container's (addReplyCommandSubCommands).
	if len(sp.subs) == 0 {
		w.Set(0)
		return
	}
	w.Array(len(sp.subs))
	for _, name := range sortedKeys(sp.subs) {
		sp.subs[name].writeInfo(w, full+"|"+name)
	}
}
