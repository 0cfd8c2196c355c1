package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bfserver/bfserver/command"
)

// Storage faults. A node whose disk fails (full, or returning errors)
// stays up: while the Raft log or the image cannot be written it refuses
// writes with a storage error (MISCONF on the wire, as Redis answers while
// its AOF cannot be written), keeps answering reads, reports not-ready,
// and logs the cause once. The image writer keeps what it could not write
// (keyspace.Cut.Restore) and retries every second; a leader whose log
// failed proposes an empty entry every second. The first write that works
// clears the fault.

// fault is what failed to write.
type fault int

const (
	faultLog   fault = iota // the Raft log (raft.db)
	faultImage              // the Pebble image
	faultSpace              // room for the Raft log
	numFaults
)

var faultNames = [numFaults]string{"the Raft log", "the image", "the Raft log"}

// logReserve is the free space the Raft log's filesystem must keep: below
// it the node refuses writes before the log fills, because Raft stops the
// process when it cannot store its term (and an append that fails makes a
// leader step down).
const logReserve = 64 << 20

// checkLogSpace reports whether the data directory's filesystem keeps the
// log's reserve free.
func (n *Node) checkLogSpace() {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.opts.DataDir, &st); err != nil {
		return
	}
	free := st.Bavail * uint64(st.Bsize)
	var err error
	if free < logReserve {
		err = fmt.Errorf("%w: %d bytes free on its filesystem, under a reserve of %d", syscall.ENOSPC, free, logReserve)
	}
	n.disk.report(faultSpace, err)
}

// diskHealth is the node's record of storage faults.
type diskHealth struct {
	log     *slog.Logger
	mu      sync.Mutex
	faults  [numFaults]error
	current atomic.Pointer[command.StorageError] // nil while every write works
}

// report records how a write of kind went: an error starts (or continues)
// a fault, nil ends it. It logs each fault once when it starts and once
// when it clears.
func (d *diskHealth) report(kind fault, err error) {
	if err == nil && d.current.Load() == nil {
		return // the common case: healthy, and still
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.faults[kind]
	d.faults[kind] = err
	switch {
	case err != nil && was == nil:
		d.log.Error("cannot write to disk: refusing writes until it works again", "what", faultNames[kind], "err", err)
	case err == nil && was != nil:
		d.log.Info("disk writes work again", "what", faultNames[kind])
	}
	var cur *command.StorageError
	for k, e := range d.faults {
		if e != nil {
			cur = &command.StorageError{Cause: "writing " + faultNames[k] + ": " + cause(e)}
			break
		}
	}
	d.current.Store(cur)
}

// cause is an error's text, with a full disk named as Redis's strerror
// names it.
func cause(err error) string {
	text := err.Error()
	if errors.Is(err, syscall.ENOSPC) {
		const lower = "no space left on device"
		if i := strings.Index(text, lower); i >= 0 {
			return text[:i] + "No space left on device" + text[i+len(lower):]
		}
		return "No space left on device: " + text
	}
	return text
}

// err is the current fault as the error writes are refused with, or nil.
func (d *diskHealth) err() error {
	if e := d.current.Load(); e != nil {
		return e
	}
	return nil
}

// failing reports whether kind is failing now.
func (d *diskHealth) failing(kind fault) bool {
	if d.current.Load() == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.faults[kind] != nil
}
