package integration

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docBlock returns the first fenced block of the given language after the
// heading in docs/CLIENTS.md.
func docBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "CLIENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no %q in docs/CLIENTS.md", heading)
	}
	_, block, ok := strings.Cut(after, "```"+lang+"\n")
	if !ok {
		t.Fatalf("no %s block under %q", lang, heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// TestClientsDocPython runs docs/CLIENTS.md's redis-py snippet, as
// written, against a node with a password.
func TestClientsDocPython(t *testing.T) {
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import redis").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3-redis not installed (apt-get install python3-redis): %s", out)
		}
		t.Skip("python3-redis not installed (apt-get install python3-redis)")
	}
	n := start(t, "--requirepass", "secret")
	host, port, _ := net.SplitHostPort(n.addr)
	code := docBlock(t, "## redis-py", "python")
	if strings.Count(code, `host="localhost", port=6379`) != 2 {
		t.Fatal("the snippet's address changed; update this test")
	}
	code = strings.ReplaceAll(code, `host="localhost", port=6379`, `host="`+host+`", port=`+port)
	if out, err := exec.Command(py, "-c", code+"\nprint('ok')\n").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redis-py snippet: %v\n%s", err, out)
	}
}

// TestClientsDocNode runs docs/CLIENTS.md's node-redis snippet, as
// written, with the pinned node-redis; a failed console.assert fails it.
func TestClientsDocNode(t *testing.T) {
	node := needTool(t, "node", "nodejs")
	if _, err := os.Stat("node/node_modules/redis"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node-redis not installed (cd integration/node && npm ci)")
		}
		t.Skip("node-redis not installed (cd integration/node && npm ci)")
	}
	n := start(t, "--requirepass", "secret")
	code := docBlock(t, "## node-redis", "js")
	if !strings.Contains(code, "redis://:secret@localhost:6379") {
		t.Fatal("the snippet's address changed; update this test")
	}
	code = strings.ReplaceAll(code, "localhost:6379", n.addr)
	// console.assert only prints: make it throw.
	code = "console.assert = (ok, ...msg) => { if (!ok) throw new Error('assertion failed ' + msg.join(' ')); };\n" + code + "\nconsole.log('ok');\n"
	// Beside node_modules, so that the import resolves.
	file := filepath.Join("node", "clientsdoc-"+strconv.Itoa(os.Getpid())+".mjs")
	if err := os.WriteFile(file, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(file) })
	if out, err := exec.Command(node, file).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("node-redis snippet: %v\n%s", err, out)
	}
}
