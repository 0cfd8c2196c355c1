package server

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
	"github.com/bfserver/bfserver/memstore"
)

// stalling answers its first write with an unknown outcome, as a log
// that cannot commit does, and keeps the commands: a replicated log may
// still encode them after the client was told the outcome is unknown.
type stalling struct {
	*memstore.Store
	mu   sync.Mutex
	kept []*command.Cmd
}

func (s *stalling) Write(ctx context.Context, cmds []*command.Cmd) ([]keyspace.Result, error) {
	s.mu.Lock()
	first := s.kept == nil
	if first {
		s.kept = cmds
	}
	s.mu.Unlock()
	if first {
		return nil, command.ErrLogTimeout // a log that could not commit it in time
	}
	return s.Store.Write(ctx, cmds)
}

// TestUnknownOutcomeKeepsCommands: a write whose outcome is unknown may
// still be appended to the log later, so the commands handed to the
// backend must keep their bytes while the connection goes on reading:
// otherwise the log would carry a command the client never sent.
func TestUnknownOutcomeKeepsCommands(t *testing.T) {
	b := &stalling{Store: memstore.New()}
	srv, err := New(Options{Addr: "127.0.0.1:0"}, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	send := func(cmd string) string {
		t.Helper()
		var req strings.Builder
		args := strings.Fields(cmd)
		req.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
		for _, a := range args {
			req.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
		}
		if _, err := nc.Write([]byte(req.String())); err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	if got := send("BF.ADD key1 aaaa"); !strings.HasPrefix(got, "-") {
		t.Fatalf("stalled write answered %q", got)
	}
	// The same shape again: without care it lands on the same bytes.
	if got := send("BF.ADD key2 zzzz"); got != ":1\r\n" {
		t.Fatalf("second write answered %q", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.kept[0]; string(c.Key) != "key1" || string(c.Items[0]) != "aaaa" {
		t.Fatalf("the stalled command now reads %s %q", c.Key, c.Items)
	}
}
