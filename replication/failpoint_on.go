//go:build failpoints

package replication

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
)

// failpoint, in a build with the failpoints tag (tests only), stops at a
// named place once a test arms it: with BFSERVER_FAILPOINT_DIR set and the
// file NAME.arm in it, the next goroutine to pass removes it, writes
// NAME.hit and waits until NAME.release appears. A test can then pause
// the process (SIGSTOP) exactly there.
func failpoint(name string) {
	dir := os.Getenv("BFSERVER_FAILPOINT_DIR")
	if !armed(dir, name) {
		return
	}
	release := filepath.Join(dir, name+".release")
	for {
		if os.Remove(release) == nil {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling for the test's release
	}
}

// armed takes NAME.arm from dir, if it is there, and writes NAME.hit.
func armed(dir, name string) bool {
	if dir == "" {
		return false
	}
	if os.Remove(filepath.Join(dir, name+".arm")) != nil {
		return false // not armed, or another goroutine took it
	}
	os.WriteFile(filepath.Join(dir, name+".hit"), nil, 0o600)
	return true
}

// failpointCorrupt, armed as failpoint is, flips the bits of the middle
// byte of b once: the next pass after NAME.arm appears damages it and
// writes NAME.hit.
func failpointCorrupt(name string, b []byte) {
	if len(b) > 0 && armed(os.Getenv("BFSERVER_FAILPOINT_DIR"), name) {
		b[len(b)/2] ^= 0xff
	}
}

// failpointTransport wraps Raft's transport so that the snapshots it sends
// pass failpoint "snapshot-send": armed, the byte in the middle of the
// next stream sent is damaged on its way out, after the snapshot store
// checked its own CRC and before the follower's store computes one: in
// transit, as a network or a sender's memory could.
func failpointTransport(t *raft.NetworkTransport) raft.Transport { return corruptingTransport{t} }

type corruptingTransport struct{ *raft.NetworkTransport }

func (t corruptingTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.NetworkTransport.InstallSnapshot(id, target, args, resp, &corruptingReader{r: data, mid: args.Size / 2})
}

// corruptingReader passes the byte at offset mid through failpointCorrupt.
type corruptingReader struct {
	r        io.Reader
	off, mid int64
}

func (c *corruptingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.off <= c.mid && c.mid < c.off+int64(n) {
		i := c.mid - c.off
		failpointCorrupt("snapshot-send", p[i:i+1])
	}
	c.off += int64(n)
	return n, err
}
