package keyspace

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/scalable"
)

// pretest tests the items of a log entry's large BF.MADDs against their
// chains' older links on a second goroutine, ahead of Apply.
//
// Why: a bulk load (pipelined BF.MADD of 1,000 items into an auto-created
// chain) spends its time in the state machine's adds, on one goroutine,
// while the node's other core is mostly idle; and about half of an add is
// its test against the chain's older links, which take no more items
// (scalable.Chain.TestOlder). So while Apply adds an entry's first
// commands, the helper tests the later ones, in order, and Apply then
// only adds (AddManyTested). Apply takes a command the helper has not
// started, and waits for one it is testing.
//
// Why the state stays a function of the log: the entry holds only
// BF.ADD-family commands, which change a chain's newest link and nothing
// older, so what the helper read is what Apply would read; a chain
// replaced within the entry (an expired key deleted and created again) is
// another chain, which AddManyTested does not take the tests of. The
// helper reads as lookups do, without a lock, and ends before ApplyEntry
// returns. Answers and bits are Apply's alone, on every replica.
type pretest struct {
	k     *Keyspace
	cmds  []*command.Cmd
	slot  []int32 // by position in cmds: its index in res, or -1
	at    []int   // by index in res: the position in cmds
	res   []scalable.Older
	state []atomic.Uint32
	stop  atomic.Bool
	wg    sync.WaitGroup
	// taken counts the commands Apply added with the helper's tests, for
	// tests to see that it ran.
	taken int
}

// A command's state, in pretest.state.
const (
	ptFree    = iota
	ptTesting // the helper's
	ptTested  // the helper's, done
	ptApply   // Apply's own
)

// pretestMin is the fewest items of a command the helper tests: below it
// the hand-over costs more than the tests.
const pretestMin = 256

// startPretest starts the helper for an entry that has at least two
// commands worth it (the helper starts late, 0.4–4 ms on the VM measured,
// and Apply takes the first itself), and returns nil for any other.
func (k *Keyspace) startPretest(cmds []*command.Cmd) *pretest {
	n := 0
	for _, c := range cmds {
		if c.Op != command.BFAdd {
			return nil
		}
		if k.pretestable(c) {
			n++
		}
	}
	if n < 2 {
		return nil
	}
	p := &k.pt
	p.k, p.cmds = k, cmds
	p.slot, p.at = p.slot[:0], p.at[:0]
	for i, c := range cmds {
		if !k.pretestable(c) {
			p.slot = append(p.slot, -1)
			continue
		}
		p.slot = append(p.slot, int32(len(p.at)))
		p.at = append(p.at, i)
	}
	if cap(p.res) < n {
		p.res = make([]scalable.Older, n)
		p.state = make([]atomic.Uint32, n)
	}
	p.res, p.state = p.res[:n], p.state[:n]
	for j := range p.state {
		p.res[j].Chain = nil
		p.state[j].Store(ptFree)
	}
	p.stop.Store(false)
	p.wg.Add(1)
	go p.run()
	return p
}

// pretestable reports whether c is worth the helper: enough items, into a
// chain that has older links now.
func (k *Keyspace) pretestable(c *command.Cmd) bool {
	if len(c.Items) < pretestMin {
		return false
	}
	v := k.db(c.DB).keys.getBytes(c.Key)
	if v == nil || v.Kind != KindBloom {
		return false
	}
	var one [1]*scalable.Link
	return len(v.Bloom().LinksIn(&one)) > 1
}

func (p *pretest) run() {
	defer p.wg.Done()
	for j, i := range p.at {
		if p.stop.Load() {
			return
		}
		if !p.state[j].CompareAndSwap(ptFree, ptTesting) {
			continue
		}
		c := p.cmds[i]
		if v := p.k.db(c.DB).keys.getBytes(c.Key); v != nil && v.Kind == KindBloom {
			v.Bloom().TestOlder(c.Items, &p.res[j])
		}
		p.state[j].Store(ptTested)
	}
}

// take returns the helper's tests of cmds[i], or nil when Apply makes
// them itself.
func (p *pretest) take(i int) *scalable.Older {
	j := p.slot[i]
	if j < 0 || p.state[j].CompareAndSwap(ptFree, ptApply) {
		return nil
	}
	for p.state[j].Load() == ptTesting {
		runtime.Gosched() // the helper is at it: less than doing it again
	}
	if p.res[j].Chain == nil {
		return nil
	}
	p.taken++
	return &p.res[j]
}

// finish stops the helper and waits for it: after it, the entry's
// commands and the helper's results are nobody's but Apply's.
func (p *pretest) finish() {
	p.stop.Store(true)
	p.wg.Wait()
	p.cmds = nil
}
