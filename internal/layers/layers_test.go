// Package layers checks that imports point down the layers of
// docs/ARCHITECTURE.md, with `go list -deps`.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/bfserver/bfserver/"

// rules list, per package, the project packages it may depend on (directly
// or not), and what it must not import itself: the pure layers do no I/O,
// read no clock and draw no randomness.
var rules = []struct {
	pkg       string
	may       []string
	forbidden []string
}{
	// One writer's stores that lock-free readers load: the bottom layer.
	{"internal/release", nil, []string{"net", "os", "log", "time", "math/rand"}},
	{"engine", []string{"internal/release"}, []string{"net", "os", "log", "time", "math/rand"}},
	{"rdb", nil, []string{"net", "os", "log"}},
	{"internal/wire", nil, []string{"net", "os", "log", "time", "math/rand"}},
	// C's case rules (strcasecmp): every keyword and name a client sends
	// is compared with them.
	{"internal/ascii", nil, []string{"net", "os", "log", "time", "math/rand"}},
	{"internal/ratelog", nil, []string{"net", "os"}},
	// I/O only: it knows sockets, not the protocol they carry.
	{"internal/evloop", nil, nil},
	{"internal/merge", nil, []string{"net", "os", "log", "time", "math/rand"}},
	// The sketches (sliding windows, Count-Min Sketch, Top-K, t-digest)
	// are pure algorithms beside scalable: no I/O, clocks or randomness.
	{"sketch/window", []string{"engine", "internal/release", "rdb"}, []string{"net", "os", "log", "time", "math/rand"}},
	{"sketch/cms", []string{"engine", "internal/release", "rdb"}, []string{"net", "os", "log", "time", "math/rand"}},
	{"sketch/topk", []string{"engine", "internal/release", "rdb"}, []string{"net", "os", "log", "time", "math/rand"}},
	{"sketch/tdigest", []string{"engine", "internal/release", "rdb"}, []string{"net", "os", "log", "time", "math/rand"}},
	{"command", []string{"internal/wire", "engine", "internal/release", "rdb", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest"}, []string{"net", "os", "log"}},
	{"scalable", []string{"engine", "internal/release", "rdb"}, []string{"net", "os", "log", "time", "math/rand"}},
	{"keyspace", []string{"internal/ascii", "internal/merge", "engine", "internal/release", "rdb", "scalable", "command", "internal/wire", "internal/glob", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest"}, []string{"net", "os", "log"}},
	// Removing large files without holding the filesystem's journal.
	{"internal/shrink", nil, []string{"net"}},
	{"persistence", []string{"internal/ascii", "internal/merge", "engine", "internal/release", "rdb", "scalable", "command", "internal/wire", "internal/glob", "internal/shrink", "keyspace", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest"}, []string{"net"}},
	{"memstore", []string{"internal/ascii", "internal/merge", "engine", "internal/release", "rdb", "scalable", "command", "internal/wire", "internal/glob", "keyspace", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest"}, nil},
	// The wire protocol alone: framing, limits, replies; no server state.
	{"resp", []string{"internal/redisnum", "internal/ascii"}, []string{"net", "os", "log", "time"}},
	// How Redis reads and writes numbers where clients see them.
	{"internal/redisnum", []string{"internal/ascii"}, []string{"net", "os", "log", "time", "math/rand"}},
	// What clients and ACL rules know of each command: data, and the
	// replies that render it.
	{"cmdinfo", []string{"resp", "internal/redisnum", "internal/ascii"}, []string{"net", "os", "log", "time"}},
	{"internal/glob", nil, []string{"net", "os", "log", "time", "math/rand"}},
	// Users and their rules: pure logic over the commands' metadata.
	{"acl", []string{"cmdinfo", "resp", "internal/glob", "internal/redisnum", "internal/ascii"}, []string{"net", "os", "log", "time"}},
	{"server", []string{"internal/ascii", "internal/merge", "resp", "cmdinfo", "acl", "internal/glob", "engine", "internal/release", "rdb", "scalable", "command", "internal/wire", "internal/atomicfile", "internal/memtune", "internal/ratelog", "internal/evloop", "keyspace", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest", "internal/redisnum"}, []string{"github.com/cockroachdb/pebble/v2"}},
	{"replication", []string{"internal/ascii", "internal/merge", "engine", "internal/release", "rdb", "scalable", "command", "internal/wire", "internal/glob", "internal/atomicfile", "internal/shrink", "internal/memtune", "internal/ratelog", "keyspace", "persistence", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest"}, nil},
	// A client of any RedisBloom-compatible server: it builds filters with
	// the pure layers and talks to servers over RESP only (command: the
	// server's own split of a large chunk, so that it sends pieces the
	// server keeps as they are).
	{"movein", []string{"engine", "internal/release", "rdb", "scalable", "command", "internal/wire", "sketch/window", "sketch/cms", "sketch/topk", "sketch/tdigest"}, nil},
}

func TestImportsPointDown(t *testing.T) {
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", mod+r.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", r.pkg, err)
		}
		direct, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, mod+r.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", r.pkg, err)
		}
		for _, imp := range strings.Fields(string(direct)) {
			for _, f := range r.forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("%s imports %s", r.pkg, imp)
				}
			}
		}
		may := map[string]bool{r.pkg: true}
		for _, m := range r.may {
			may[m] = true
		}
		for _, dep := range strings.Fields(string(out)) {
			if own, ok := strings.CutPrefix(dep, mod); ok && !may[own] {
				t.Errorf("%s depends on %s", r.pkg, own)
			}
			if strings.HasPrefix(dep, "github.com/hashicorp/raft") && r.pkg != "replication" {
				t.Errorf("%s depends on %s", r.pkg, dep)
			}
		}
	}
}
