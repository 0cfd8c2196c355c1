package resp

import (
	"os"
	"strings"
)

func pid() int { return os.Getpid() }

// cmdCommand implements COMMAND, COMMAND COUNT|INFO|DOCS|LIST|GETKEYS.
func cmdCommand(s *session, a [][]byte) {
	if len(a) == 1 {
		names := sortedKeys(commands)
		s.w.Array(len(names))
		for _, n := range names {
			commands[n].writeInfo(&s.w)
		}
		return
	}
	switch strings.ToUpper(string(a[1])) {
	case "COUNT":
		s.w.Int(int64(len(commands)))
	case "LIST":
		names := sortedKeys(commands)
		s.w.Array(len(names))
		for _, n := range names {
			s.w.BulkString(n)
		}
	case "INFO":
		names := a[2:]
		if len(names) == 0 {
			cmdCommand(s, a[:1])
			return
		}
		s.w.Array(len(names))
		for _, n := range names {
			if sp := lookupSpec(n); sp != nil {
				sp.writeInfo(&s.w)
			} else {
				s.w.Null()
			}
		}
	case "DOCS":
		var list []*spec
		if len(a) == 2 {
			for _, n := range sortedKeys(commands) {
				list = append(list, commands[n])
			}
		} else {
			for _, n := range a[2:] {
				if sp := lookupSpec(n); sp != nil {
					list = append(list, sp)
				}
			}
		}
		s.w.Map(len(list))
		for _, sp := range list {
			s.w.BulkString(sp.name)
			writeDocs(&s.w, sp)
		}
	case "GETKEYS":
		if len(a) < 3 {
			s.w.Error(arityError("command|getkeys"))
			return
		}
		args := a[2:]
		sp := lookupSpec(args[0])
		if sp == nil {
			s.w.Error("ERR Invalid command specified")
			return
		}
		if !sp.checkArity(len(args)) {
			s.w.Error("ERR Invalid number of arguments specified for command")
			return
		}
		if sp.first == 0 {
			s.w.Error("ERR The command has no key arguments")
			return
		}
		last := sp.last
		if last < 0 {
			last = len(args) + last
		}
		var keys [][]byte
		for i := sp.first; i <= last && i < len(args); i += max(sp.step, 1) {
			keys = append(keys, args[i])
		}
		s.w.Array(len(keys))
		for _, k := range keys {
			s.w.Bulk(k)
		}
	case "HELP":
		s.w.Array(1)
		s.w.Simple("COMMAND [<subcommand>]: COUNT, DOCS, INFO, LIST, GETKEYS")
	default:
		s.w.Error("ERR unknown subcommand '" + sanitize(string(a[1]), 128) + "'. Try COMMAND HELP.")
	}
}

// writeDocs renders a COMMAND DOCS entry: enough for redis-cli's help.
func writeDocs(w *Writer, sp *spec) {
	group := "generic"
	switch {
	case strings.HasPrefix(sp.name, "bf."):
		group = "bf"
	case strings.HasPrefix(sp.name, "cf."):
		group = "cf"
	case sp.run != nil:
		group = "connection"
	}
	n := 3
	if sp.module {
		n = 4
	}
	w.Map(n)
	w.BulkString("summary")
	w.BulkString(docSummary(sp))
	w.BulkString("since")
	w.BulkString("1.0.0")
	w.BulkString("group")
	if sp.module {
		w.BulkString("module")
		w.BulkString("module")
		w.BulkString("bf")
	} else {
		w.BulkString(group)
	}
}

var summaries = map[string]string{
	"bf.reserve": "Creates a new Bloom Filter", "bf.add": "Adds an item to a Bloom Filter",
	"bf.madd":   "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
	"bf.insert": "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
	"bf.exists": "Checks whether an item exists in a Bloom Filter", "bf.mexists": "Checks whether one or more items exist in a Bloom Filter",
	"bf.info": "Returns information about a Bloom Filter", "bf.card": "Returns the cardinality of a Bloom filter",
	"bf.scandump": "Begins an incremental save of the bloom filter", "bf.loadchunk": "Restores a filter previously saved using SCANDUMP",
	"cf.reserve": "Creates a new Cuckoo Filter", "cf.add": "Adds an item to a Cuckoo Filter",
	"cf.addnx":    "Adds an item to a Cuckoo Filter if the item did not exist previously.",
	"cf.insert":   "Adds one or more items to a Cuckoo Filter. A filter will be created if it does not exist",
	"cf.insertnx": "Adds one or more items to a Cuckoo Filter if the items did not exist previously. A filter will be created if it does not exist",
	"cf.exists":   "Checks whether one or more items exist in a Cuckoo Filter", "cf.mexists": "Checks whether one or more items exist in a Cuckoo Filter",
	"cf.count": "Return the number of times an item might be in a Cuckoo Filter", "cf.del": "Deletes an item from a Cuckoo Filter",
	"cf.info": "Returns information about a Cuckoo Filter", "cf.scandump": "Begins an incremental save of the bloom filter",
	"cf.loadchunk": "Restores a filter previously saved using SCANDUMP",
}

func docSummary(sp *spec) string {
	if s, ok := summaries[sp.name]; ok {
		return s
	}
	return strings.ToUpper(sp.name) + " command"
}
