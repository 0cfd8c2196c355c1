// Package evloop serves many connections from a few goroutines, each
// waiting on an epoll set, as Redis's event loop does: one wait returns
// every connection with input, each is read once, and their replies are
// written once all are read, mostly one write each (Redis writes them in
// beforeSleep: a client behind several connections then wakes once a
// turn; a connection that parks, or a large reply, is written at once).
// Go's own poller parks a goroutine per connection instead, and a
// request then costs a wake-up, a scheduling round and a read that finds
// nothing; at one request per round trip (pipeline depth 1) that is most
// of the server's time beyond the two system calls the request needs
// (docs/ARCHITECTURE.md, Decisions).
//
// The handler runs on the loop and must not wait. What may wait (a write
// through the log, a read barrier that asks the leader, CLIENT PAUSE) is
// taken out of the loop: the handler parks the connection, and the loop
// neither reads nor writes it until whoever took it calls Resume. A parked
// connection is read no further, so a client that sends faster than its
// commands are answered is held back by TCP, as with a goroutine per
// connection; so is one that does not read its replies: while output
// waits for the socket, the loop reads nothing more from it.
//
// A handler that is also a TurnEnder is told when a loop has served what
// one wait returned and written the replies held for the turn, before it
// waits again (Redis's beforeSleep): what the turn's connections left for
// it to do together, it does there, on the loop.
//
// Ownership: a connection belongs to its loop, or, parked, to whoever
// parked it; only the owner touches its buffers and descriptor. Close may
// be called from anywhere: the loop closes the connection as soon as it
// owns it. Requests from other goroutines (add, resume, close) reach a
// loop through a queue and an eventfd.
package evloop

// Handler is what a Group serves connections for.
type Handler interface {
	// Traffic runs on the loop with the connection's unconsumed input:
	// what was left from before followed by the n bytes just read (n is
	// 0 when a resumed connection's owner left input unconsumed). It
	// returns how much of it was consumed (the rest is kept, owned by the
	// connection) and what to do next. in is valid only during the call.
	Traffic(c *Conn, in []byte, n int) (used int, act Action)
	// Parked runs on the loop once a connection is parked (Traffic
	// returned Park); it hands the connection to whoever serves it until
	// Resume, and must not wait itself.
	Parked(c *Conn)
	// Closed runs on the loop once, after the connection's descriptor is
	// closed (not for one detached).
	Closed(c *Conn)
}

// TurnEnder is a Handler told when a loop has served every connection one
// wait for events returned, before it waits again (Redis's beforeSleep):
// what the turn's connections left to do together (the writes they parked
// with the loop, through one log write) is done there.
type TurnEnder interface {
	TurnEnd(loop int)
}

// Action is what the loop does with a connection after Traffic.
type Action uint8

const (
	// Continue reading the connection.
	Continue Action = iota
	// Park takes the connection out of the loop until Resume.
	Park
	// Close closes the connection once its output is written.
	Close
)

// Options configure a Group. Zero values take the documented defaults.
type Options struct {
	// Loops is how many event loops run. Default GOMAXPROCS - 1, at
	// least 1 (defaultLoops says why).
	Loops int
	// ReadSize is the most one read takes into a loop's shared buffer.
	// Default 64 KiB.
	ReadSize int
	// OnPanic is told of a panic in Traffic; the connection is closed.
	// Default: ignore it.
	OnPanic func(c *Conn, r any)
}

// WithDefaults is o with each unset field at its default, as Start runs
// it: for a handler that sizes per-loop state before the loops start.
func (o Options) WithDefaults() Options {
	o.ensureDefaults()
	return o
}

func (o *Options) ensureDefaults() {
	if o.Loops <= 0 {
		o.Loops = runtimeProcs()
	}
	if o.ReadSize <= 0 {
		o.ReadSize = 64 << 10
	}
	if o.OnPanic == nil {
		o.OnPanic = func(*Conn, any) {}
	}
}
