package replication

import (
	"io"
	"log/slog"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/persistence"
	"github.com/hashicorp/raft"
)

// FuzzFSMApply feeds arbitrary log entries to the state machine: it never
// panics; an entry it can read moves the applied index, one it cannot
// halts it, and after a halt nothing moves.
func FuzzFSMApply(f *testing.F) {
	f.Add(command.EncodeBatch([]*command.Cmd{{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("a")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 16}}))
	f.Add(command.EncodeBatch([]*command.Cmd{{Op: command.CFAdd, Key: []byte("c"), Items: [][]byte{[]byte("a")}, Capacity: 1024, MaxBytes: 1 << 16}}))
	// A Watch that aborts, guarding more commands than its entry holds.
	f.Add(command.EncodeBatch([]*command.Cmd{{Op: command.Watch, Keys: [][]byte{[]byte("k")}, Data: make([]byte, command.WatchEntryBytes), Count: 9},
		{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("a")}, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 16}}))
	f.Add(command.EncodeBatch([]*command.Cmd{
		{Op: command.ACLSetUser, Key: []byte("u"), Items: [][]byte{[]byte("on"), []byte("+@all")}, NX: true},
		{Op: command.ACLSetUser, Key: []byte("u"), Items: [][]byte{[]byte("off")}, Keys: [][]byte{[]byte("on"), []byte("+@all")}},
		{Op: command.ACLDelUser, Keys: [][]byte{[]byte("u"), []byte("default")}},
	}))
	f.Add([]byte{3, 9, 1, 2, 0})
	f.Add([]byte{2, 1, 63, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		store, err := persistence.Open(persistence.Options{Dir: "/img", InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		m, err := newFSM(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		cmds, derr := command.DecodeBatch(data)
		for _, c := range cmds {
			// Valid giants are the cap's business, not the fuzzer's memory's.
			c.MaxBytes = min(c.MaxBytes, 1<<16)
		}
		readable := derr == nil
		for _, c := range cmds {
			readable = readable && c.Op.Known()
		}
		if derr == nil {
			data = command.EncodeBatch(cmds)
		}
		m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		if halted := m.halt.Load() != nil; halted == readable {
			t.Fatalf("readable %v, halted %v", readable, halted)
		}
		if readable != (m.applied.Load() == 1) {
			t.Fatalf("readable %v, applied %d", readable, m.applied.Load())
		}
		m.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: command.EncodeBatch(nil)})
		if !readable && m.applied.Load() != 0 {
			t.Fatal("an entry applied after a halt")
		}
	})
}
