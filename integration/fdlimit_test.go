package integration

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// flood opens n idle connections to addr, each sending first (if any):
// connections the server closes at once count too. The caller closes them.
func flood(t *testing.T, addr string, n int, first string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			break // the listen backlog is full: enough
		}
		if first != "" {
			c.Write([]byte(first))
		}
		conns = append(conns, c)
	}
	if len(conns) < n/2 {
		t.Fatalf("only %d of %d connections to %s opened", len(conns), n, addr)
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// TestDescriptorLimit: under an open files limit of 256, the node lowers
// maxclients to what the limit leaves (saying so at start, as Redis does),
// and shows the lowered value in CONFIG GET and INFO; floods of idle
// connections to the client port and to the Raft port, each more than
// the limit, neither end the process nor stop it serving: a client
// connected before is served throughout, connections beyond maxclients
// get Redis's error, and a new client is served once the flood is gone.
func TestDescriptorLimit(t *testing.T) {
	needTool(t, "prlimit", "util-linux")
	n := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(),
		args: []string{"--cluster-secret", testSecret, "--max-peer-conns", "16"},
		wrap: []string{"prlimit", "--nofile=256:256", "--"}}
	n.launch()
	// 256 - (32 reserved + 2×16 Raft port + 74 image files) = 118.
	const lowered = "118"
	log := n.logs.String()
	for _, msg := range []string{
		"You requested maxclients of 10000 requiring at least",
		"maxclients has been reduced to " + lowered + " to compensate for low ulimit",
	} {
		if !strings.Contains(log, msg) {
			t.Fatalf("the start log does not say %q:\n%s", msg, log)
		}
	}
	legit := dialRaw(t, n)
	if got := legit.say("CONFIG GET maxclients"); got != "*2\r\n$10\r\nmaxclients\r\n$3\r\n"+lowered+"\r\n" {
		t.Fatalf("CONFIG GET maxclients: %s, want %s", got, lowered)
	}
	if got := infoOf(n, "clients")["maxclients"]; got != lowered {
		t.Fatalf("INFO maxclients: %s, want %s", got, lowered)
	}
	if got := legit.say("CONFIG SET maxclients 10000"); !strings.Contains(got, "not able to handle the specified number of clients, try with "+lowered) {
		t.Fatalf("CONFIG SET maxclients over the limit: %q", got)
	}
	if got := legit.say("BF.ADD f before"); got != ":1\r\n" {
		t.Fatalf("BF.ADD: %q", got)
	}

	// The client port: more idle connections than the process has
	// descriptors.
	clients := flood(t, n.addr, 400, "")
	defer closeAll(clients)
	last := clients[len(clients)-1]
	last.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, _ := io.ReadAll(last); string(got) != "-ERR max number of clients reached\r\n" {
		t.Fatalf("a connection beyond maxclients got %q", got)
	}
	if got := legit.say("BF.ADD f during-client-flood"); got != ":1\r\n" {
		t.Fatalf("the connected client during the flood: %q", got)
	}
	if got := legit.say("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING during the flood: %q", got)
	}
	closeAll(clients)
	waitFor(t, 20*time.Second, "a new client served after the client flood", func() bool {
		c, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte("PING\r\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line == "+PONG\r\n"
	})

	// The Raft port: idle connections that send one byte and never
	// authenticate (closed after the 5s auth deadline, or at once beyond
	// the port's caps).
	peers := flood(t, n.raftAddr, 400, "x")
	defer closeAll(peers)
	if got := legit.say("BF.ADD f during-raft-flood"); got != ":1\r\n" {
		t.Fatalf("the connected client during the Raft port flood: %q", got)
	}
	fresh := dialRaw(t, n)
	if got := fresh.say("BF.EXISTS f during-client-flood"); got != ":1\r\n" {
		t.Fatalf("a new client during the Raft port flood: %q", got)
	}
	closeAll(peers)

	if exited(n.cmd.Process.Pid) {
		t.Fatalf("the node exited; its log ends:\n%s", n.logs)
	}
	after := dialRaw(t, n)
	for _, item := range []string{"before", "during-client-flood", "during-raft-flood"} {
		if got := after.say("BF.EXISTS f " + item); got != ":1\r\n" {
			t.Fatalf("BF.EXISTS %s after the floods: %q", item, got)
		}
	}
	if got := legit.say("PING"); got != "+PONG\r\n" {
		t.Fatalf("the first client after the floods: %q", got)
	}
	// The budget held: no accept or open met a full descriptor table.
	if strings.Contains(n.logs.String(), "too many open files") {
		t.Fatalf("the node ran out of descriptors; its log ends:\n%s", n.logs)
	}
}
