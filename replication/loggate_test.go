package replication

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// blockingStore holds every StoreLogs until released.
type blockingStore struct {
	raft.LogStore
	entered, release chan struct{}
}

func (b *blockingStore) StoreLogs(l []*raft.Log) error {
	b.entered <- struct{}{}
	<-b.release
	return b.LogStore.StoreLogs(l)
}

// TestLoggedStoreIdle: the group commit's signal is closed while the log
// is idle, open for exactly as long as a write is under way, and the write
// itself reaches the store.
func TestLoggedStoreIdle(t *testing.T) {
	inner := &blockingStore{LogStore: raft.NewInmemStore(), entered: make(chan struct{}), release: make(chan struct{})}
	s := newLoggedStore(inner, &diskHealth{}, nil)
	isClosed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	if !isClosed(s.idleCh()) {
		t.Fatal("idle signal open before any write")
	}
	done := make(chan error)
	go func() { done <- s.StoreLogs([]*raft.Log{{Index: 1, Data: []byte("x")}}) }()
	<-inner.entered
	during := s.idleCh()
	if isClosed(during) {
		t.Fatal("idle signal closed while a write is under way")
	}
	close(inner.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !isClosed(during) || !isClosed(s.idleCh()) {
		t.Fatal("idle signal still open after the write finished")
	}
	var got raft.Log
	if err := s.GetLog(1, &got); err != nil || string(got.Data) != "x" {
		t.Fatalf("the write did not reach the store: %v %q", err, got.Data)
	}
}

// BenchmarkStoreLogs measures one fsynced write of the Raft log as this
// node configures it, each store, by entry count and size: what a group
// commit costs.
func BenchmarkStoreLogs(b *testing.B) {
	for _, c := range []struct {
		kind          string
		entries, size int
	}{{LogStoreWAL, 1, 100}, {LogStoreBolt, 1, 100}, {LogStoreWAL, 1, 10_000}, {LogStoreBolt, 1, 10_000},
		{LogStoreWAL, 1, 40_000}, {LogStoreBolt, 1, 40_000}, {LogStoreWAL, 16, 600}, {LogStoreBolt, 16, 600}} {
		b.Run(fmt.Sprintf("%s/%dx%dB", c.kind, c.entries, c.size), func(b *testing.B) {
			s, err := openLogStore(b.TempDir(), c.kind, true, slog.Default())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, c.size)
			idx := uint64(1)
			for b.Loop() {
				logs := make([]*raft.Log, c.entries)
				for j := range logs {
					logs[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
					idx++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
