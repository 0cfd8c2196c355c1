package replication

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
)

// TestEntriesGrowWhileApplying: with the log fast (fsync every second)
// and the state machine the slow stage, the group commit keeps its entry
// open while entries wait to be applied (applyBacklog), so writes share
// entries rather than each going through Raft and the state machine on
// its own; and every write is answered once the backlog drains, however
// long the entry was held. Handed over as soon as the log was idle, the
// entries carried about as many commands as writers divided by the
// sixteen in flight.
func TestEntriesGrowWhileApplying(t *testing.T) {
	opts := Options{RaftAddr: freeAddr(t), RESPAddr: "127.0.0.1:1", DataDir: t.TempDir(), FlushInterval: time.Hour,
		Fsync: "everysec", MaxFilterBytes: 1 << 30}
	n, ctx := openLeader(t, opts)
	if _, err := n.Write(ctx, []*command.Cmd{{Op: command.BFReserve, Key: []byte("big"), ErrorRate: 0.001, Capacity: 20_000_000, NonScaling: true}}); err != nil {
		t.Fatal(err)
	}
	items := make([][]byte, 2000)
	const writers, each = 64, 15
	proposed, batched := n.stages.proposed.Load(), n.stages.batched.Load()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			its := make([][]byte, len(items))
			for i := range each {
				for j := range its {
					its[j] = fmt.Appendf(nil, "%d:%d:%d", w, i, j)
				}
				c := &command.Cmd{Op: command.BFAdd, Key: []byte("big"), Items: its, Multi: true, ErrorRate: 0.01, Capacity: 100, Expansion: 2, MaxBytes: 1 << 30}
				res, err := n.Write(ctx, []*command.Cmd{c})
				if err == nil && (len(res) != 1 || res[0].Err != nil || len(res[0].Ints) != len(its)) {
					err = fmt.Errorf("write %d of writer %d: %+v", i, w, res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	entries, cmds := n.stages.proposed.Load()-proposed, n.stages.batched.Load()-batched
	t.Logf("%d commands in %d entries", cmds, entries)
	if cmds != writers*each {
		t.Fatalf("%d commands proposed, want %d", cmds, writers*each)
	}
	if per := float64(cmds) / float64(entries); per < 8 {
		t.Fatalf("%.1f commands an entry: entries were handed over while the state machine was behind", per)
	}
}
