package integration

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/internal/golden"
)

// rawConn speaks RESP to a node and returns replies' exact bytes.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, n *node) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) do(args ...string) string {
	rc.t.Helper()
	rc.c.SetDeadline(time.Now().Add(15 * time.Second))
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	if _, err := rc.c.Write(golden.Encode(b)); err != nil {
		rc.t.Fatal(err)
	}
	out, err := golden.ReadFrame(rc.r)
	if err != nil {
		rc.t.Fatalf("%q: %v", args, err)
	}
	return string(out)
}

// closed reports whether the server closed the connection (within 10s).
func (rc *rawConn) closed() bool {
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := rc.r.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// say sends one command given as words.
func (rc *rawConn) say(line string) string { rc.t.Helper(); return rc.do(strings.Fields(line)...) }

// aliceRules make a user; aliceChecks are what it may and may not do, the
// same on every node, NOPERM texts exact.
var aliceRules = []string{"ACL", "SETUSER", "alice", "on", ">apw", "~bf:*", "%R~ro:*", "+@bloom", "-bf.reserve", "+ping", "+acl|whoami", "+config|get"}

var aliceChecks = [][2]string{
	{"ACL WHOAMI", "$5\r\nalice\r\n"},
	{"BF.EXISTS bf:1 x", ":1\r\n"}, // alice added it
	{"BF.EXISTS ro:1 x", ":0\r\n"},
	{"BF.EXISTS other x", "-NOPERM No permissions to access a key\r\n"},
	{"BF.DEBUG ro:1", "-NOPERM No permissions to access a key\r\n"},
	{"BF.RESERVE bf:2 0.01 100", "-NOPERM User alice has no permissions to run the 'bf.reserve' command\r\n"},
	{"CF.ADD bf:c x", "-NOPERM User alice has no permissions to run the 'cf.add' command\r\n"},
	{"CONFIG SET maxmemory 0", "-NOPERM User alice has no permissions to run the 'config|set' command\r\n"},
	{"CONFIG GET maxmemory", "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"},
	{"ACL LIST", "-NOPERM User alice has no permissions to run the 'acl|list' command\r\n"},
	{"GET bf:1", "-NOPERM User alice has no permissions to run the 'get' command\r\n"},
}

// waitAuth polls until user authenticates on n with pass (the node applies
// the log a moment after the node that took the change).
func waitAuth(t *testing.T, n *node, user, pass string) *rawConn {
	t.Helper()
	var rc *rawConn
	waitFor(t, 30*time.Second, user+" authenticates on "+n.addr, func() bool {
		c, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err != nil {
			return false
		}
		rc = &rawConn{t: t, c: c, r: bufio.NewReader(c)}
		if rc.do("AUTH", user, pass) == "+OK\r\n" {
			t.Cleanup(func() { c.Close() })
			return true
		}
		c.Close()
		return false
	})
	return rc
}

func checkAlice(t *testing.T, n *node, rc *rawConn) {
	t.Helper()
	for _, c := range aliceChecks {
		if got := rc.say(c[0]); got != c[1] {
			t.Errorf("%s on %s: %q, want %q", c[0], n.addr, got, c[1])
		}
	}
}

// TestACLReplicated: ACL SETUSER on one node goes through the log: the
// user authenticates on the other two and is refused the same commands
// and keys there; after every node is killed (SIGKILL) and restarted the
// user is there with the same rules everywhere; ACL DELUSER replicates
// too, and closes the user's connections on every node. --user users are
// written into the table once, for the whole cluster.
func TestACLReplicated(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, "--user", "seed on >spw +@read ~*")
	first := dialRaw(t, nodes[0])
	if got := first.do(aliceRules...); got != "+OK\r\n" {
		t.Fatalf("ACL SETUSER on %s: %q", nodes[0].addr, got)
	}
	// Acknowledged on one node, the user authenticates on every node at
	// once (a failed AUTH waits for a read barrier and looks again).
	for _, n := range nodes {
		if got := dialRaw(t, n).say("AUTH alice apw"); got != "+OK\r\n" {
			t.Errorf("AUTH alice right after ACL SETUSER, on %s: %q", n.addr, got)
		}
	}
	alice0 := waitAuth(t, nodes[0], "alice", "apw")
	if got := alice0.say("BF.ADD bf:1 x"); got != ":1\r\n" {
		t.Fatalf("alice's BF.ADD: %q", got)
	}
	for _, n := range nodes {
		checkAlice(t, n, waitAuth(t, n, "alice", "apw"))
		if got := waitAuth(t, n, "seed", "spw").say("BF.ADD k x"); got != "-NOPERM User seed has no permissions to run the 'bf.add' command\r\n" {
			t.Errorf("seed user on %s: %q", n.addr, got)
		}
	}
	want := first.say("ACL LIST")
	if !strings.Contains(want, "user alice on sanitize-payload #") || !strings.Contains(want, "user seed on sanitize-payload #") {
		t.Fatalf("ACL LIST %q", want)
	}
	list := func(n *node) string {
		var got string
		waitFor(t, 30*time.Second, "ACL LIST on "+n.addr, func() bool {
			c, err := net.DialTimeout("tcp", n.addr, time.Second)
			if err != nil {
				return false
			}
			defer c.Close()
			got = (&rawConn{t: t, c: c, r: bufio.NewReader(c)}).say("ACL LIST")
			return got == want
		})
		return got
	}
	for _, n := range nodes[1:] {
		list(n)
	}

	// Every node dies at once, and comes back.
	for _, n := range nodes {
		n.kill()
	}
	for _, n := range nodes {
		n.launch()
	}
	leaderOf(t, nodes)
	for _, n := range nodes {
		list(n)
		checkAlice(t, n, waitAuth(t, n, "alice", "apw"))
	}

	// DELUSER on another node: gone everywhere, its connections closed.
	open := waitAuth(t, nodes[2], "alice", "apw")
	if got := dialRaw(t, nodes[1]).say("ACL DELUSER alice"); got != ":1\r\n" {
		t.Fatalf("ACL DELUSER: %q", got)
	}
	if !open.closed() {
		t.Error("alice's connection to another node stayed open after ACL DELUSER")
	}
	for _, n := range nodes {
		waitFor(t, 30*time.Second, "alice gone on "+n.addr, func() bool {
			return dialRaw(t, n).say("AUTH alice apw") == "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
		})
		if got := dialRaw(t, n).say("ACL GETUSER alice"); got != "$-1\r\n" {
			t.Errorf("ACL GETUSER alice on %s after DELUSER: %q", n.addr, got)
		}
	}
}
