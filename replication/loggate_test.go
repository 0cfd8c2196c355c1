package replication

import (
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
	s := newLoggedStore(inner)
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
