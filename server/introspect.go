package server

import (
	"os"
	"strings"

	"github.com/bfserver/bfserver/cmdinfo"
	"github.com/bfserver/bfserver/internal/ascii"
)

func pid() int { return os.Getpid() }

// COMMAND is a container, as in Redis: its subcommands are looked up, arity
// checked and ACL checked like CONFIG's, and their errors read the same
// ("ERR unknown subcommand 'X'. Try COMMAND HELP.", "wrong number of
// arguments for 'command|count' command"). This init runs after conn.go's,
// which registers the bare COMMAND.
func registerIntrospect() {
	sub := func(name string, arity int, run func(*session, [][]byte)) *spec {
		return &spec{name: name, arity: arity, run: run}
	}
	commands["command"].subs = map[string]*spec{
		"count":           sub("count", 2, func(s *session, a [][]byte) { s.w.Int(int64(len(commands))) }),
		"docs":            sub("docs", -2, cmdCommandDocs),
		"getkeys":         sub("getkeys", -3, func(s *session, a [][]byte) { cmdGetKeys(s, a[2:], false) }),
		"getkeysandflags": sub("getkeysandflags", -3, func(s *session, a [][]byte) { cmdGetKeys(s, a[2:], true) }),
		"help":            sub("help", 2, cmdCommandHelp),
		"info":            sub("info", -2, cmdCommandInfo),
		"list":            sub("list", -2, cmdCommandList),
	}
}

// cmdCommand is the bare COMMAND: every command's INFO.
func cmdCommand(s *session, a [][]byte) {
	names := sortedKeys(commands)
	s.w.Array(len(names))
	for _, n := range names {
		commands[n].meta.WriteInfo(&s.w)
	}
}

// lookupFull finds a command by full name ("bf.add", "CONFIG|GET"), as
// Redis's lookupCommandBySds does, and returns it with its full lower-case
// name.
func lookupFull(name []byte) (*spec, string) {
	base, sub, pipe := strings.Cut(ascii.ToLower(name), "|")
	sp := commandTable()[base]
	if sp == nil || !pipe {
		return sp, base
	}
	if strings.Contains(sub, "|") || sp.subs[sub] == nil {
		return nil, ""
	}
	return sp.subs[sub], base + "|" + sub
}

func cmdCommandInfo(s *session, a [][]byte) {
	if len(a) == 2 {
		cmdCommand(s, a)
		return
	}
	s.w.Array(len(a) - 2)
	for _, n := range a[2:] {
		if sp, _ := lookupFull(n); sp != nil {
			sp.meta.WriteInfo(&s.w)
		} else {
			s.w.Null()
		}
	}
}

func cmdCommandDocs(s *session, a [][]byte) {
	type entry struct {
		full string
		sp   *spec
	}
	var list []entry
	if len(a) == 2 {
		for _, n := range sortedKeys(commands) {
			list = append(list, entry{n, commands[n]})
		}
	} else {
		for _, n := range a[2:] {
			if sp, full := lookupFull(n); sp != nil {
				list = append(list, entry{full, sp})
			}
		}
	}
	s.w.Map(len(list))
	for _, e := range list {
		s.w.BulkString(e.full)
		e.sp.meta.WriteDoc(&s.w)
	}
}

// cmdCommandList is COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]:
// every command and subcommand by full name.
func cmdCommandList(s *session, a [][]byte) {
	var keep func(full string, sp *spec) bool
	switch {
	case len(a) == 2:
		keep = func(string, *spec) bool { return true }
	case len(a) == 5 && ascii.EqualFold(a[2], "filterby"):
		arg := string(a[4])
		switch ascii.ToLower(a[3]) {
		case "module":
			keep = func(full string, sp *spec) bool { return ascii.EqualFold(sp.meta.Doc.Module, arg) }
		case "aclcat":
			keep = func(full string, sp *spec) bool {
				for _, c := range sp.meta.Info.Categories {
					if ascii.EqualFold(strings.TrimPrefix(c, "@"), arg) {
						return true
					}
				}
				return false
			}
		case "pattern":
			keep = func(full string, sp *spec) bool { return globMatchFold(arg, full) }
		}
	}
	if keep == nil {
		s.w.Error(msgSyntax)
		return
	}
	var names []string
	for _, n := range sortedKeys(commands) {
		sp := commands[n]
		if keep(n, sp) {
			names = append(names, n)
		}
		for _, sn := range sortedKeys(sp.subs) {
			if full := n + "|" + sn; keep(full, sp.subs[sn]) {
				names = append(names, full)
			}
		}
	}
	s.w.Array(len(names))
	for _, n := range names {
		s.w.BulkString(n)
	}
}

// cmdGetKeys is COMMAND GETKEYS / GETKEYSANDFLAGS <full command>, checked
// in Redis's order: unknown command, no key arguments, arity, no key found.
func cmdGetKeys(s *session, args [][]byte, withFlags bool) {
	sp := lookupSpec(args[0])
	full := ""
	if sp != nil {
		full = sp.name
		if len(args) > 1 && len(sp.subs) > 0 {
			name := ascii.ToLower(args[1])
			sp = sp.subs[name]
			full += "|" + name
		}
	}
	if sp == nil {
		s.w.Error("ERR Invalid command specified")
		return
	}
	in := sp.meta.Info
	if len(in.KeySpecs) == 0 {
		s.w.Error("ERR The command has no key arguments")
		return
	}
	if (in.Arity > 0 && in.Arity != len(args)) || len(args) < -in.Arity {
		s.w.Error("ERR Invalid number of arguments specified for command")
		return
	}
	pos, flags := sp.meta.Keys(args)
	if len(pos) == 0 {
		s.w.Error("ERR Invalid arguments specified for command")
		return
	}
	s.w.Array(len(pos))
	for i, p := range pos {
		if !withFlags {
			s.w.Bulk(args[p])
			continue
		}
		s.w.Array(2)
		s.w.Bulk(args[p])
		cmdinfo.WriteFlags(&s.w, flags[i])
	}
}

var commandHelp = []string{
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all Redis commands.",
	"COUNT",
	"    Return the total number of commands in this Redis server.",
	"LIST",
	"    Return a list of all commands in this Redis server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full Redis command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full Redis command.",
	"HELP",
	"    Print this help.",
}

func cmdCommandHelp(s *session, a [][]byte) { writeHelp(&s.w, commandHelp) }
