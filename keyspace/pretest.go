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

// Which entries the helper takes: at least two commands of pretestMin
// items or more, pretestMinItems in all, into chains whose older links
// hold pretestMinOlder bytes or more (smaller ones are tested from the
// cache faster than a goroutine is handed the work: two commands of 256
// items into a chain with 120 KB of older links applied up to 45% slower
// with the helper), and a second P for it to run on.
const (
	pretestMin      = 256
	pretestMinItems = 4096
	pretestMinOlder = 256 << 10
)

// Tests set these: pretestAlways takes every entry the helper could serve,
// whatever its size or the Ps; pretestSync runs the helper to its end
// before Apply starts, so that every test it made is as old as it can be
// and the path is taken whatever the timing.
var pretestAlways, pretestSync bool

// startPretest starts the helper for an entry it may speed up (above),
// and returns nil for any other.
func (k *Keyspace) startPretest(cmds []*command.Cmd) *pretest {
	if !pretestAlways && runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	p := &k.pt
	p.slot, p.at = p.slot[:0], p.at[:0]
	items := 0
	for i, c := range cmds {
		if c.Op != command.BFAdd {
			return nil
		}
		if !k.pretestable(c) {
			p.slot = append(p.slot, -1)
			continue
		}
		p.slot = append(p.slot, int32(len(p.at)))
		p.at = append(p.at, i)
		items += len(c.Items)
	}
	n := len(p.at)
	if n < 2 || (!pretestAlways && items < pretestMinItems) {
		return nil
	}
	p.k, p.cmds = k, cmds
	if cap(p.res) < n {
		p.res = make([]scalable.Older, n)
		p.state = make([]atomic.Uint32, n)
	}
	p.res, p.state = p.res[:n], p.state[:n]
	for j := range p.state {
		p.state[j].Store(ptFree)
	}
	p.stop.Store(false)
	p.wg.Add(1)
	if pretestSync {
		p.run()
	} else {
		go p.run()
	}
	return p
}

// pretestable reports whether c is worth the helper: enough items, into a
// chain whose older links are large enough now.
func (k *Keyspace) pretestable(c *command.Cmd) bool {
	if len(c.Items) < pretestMin {
		return false
	}
	v := k.db(c.DB).keys.getBytes(c.Key)
	if v == nil || v.Kind != KindBloom {
		return false
	}
	var one [1]*scalable.Link
	links := v.Bloom().LinksIn(&one)
	var older uint64
	for _, l := range links[:len(links)-1] {
		older += l.BloomParams.Bytes
	}
	return len(links) > 1 && (pretestAlways || older >= pretestMinOlder)
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
// commands and the helper's results are nobody's but Apply's. It lets go
// of the chains tested, so that a filter deleted later is not kept.
func (p *pretest) finish() {
	p.stop.Store(true)
	p.wg.Wait()
	p.cmds = nil
	all := p.res[:cap(p.res)]
	for i := range all {
		all[i].Chain = nil
	}
}
