package replication

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/bfserver/bfserver/internal/atomicfile"
	"github.com/hashicorp/raft"
)

// A member's id is in the Raft configuration the log carries, and by
// default it is the node's Raft address, itself by default the RESP
// port's + 10000. Without a record of it, a node restarted on another
// port took a new id, was no longer in its own configuration and never
// elected itself: a single node whose writes hung for good. The data
// directory therefore records the id at the first start (node-id), and
// later starts take it from there unless told one.

// nodeIDFile holds the member id of the node the data directory belongs to.
const nodeIDFile = "node-id"

// maxNodeID bounds what is read from the file: an id is an address or a
// name an operator typed.
const maxNodeID = 1024

// adoptNodeID sets o.NodeID from the data directory's record when the
// caller left it to its default, and refuses one given that differs.
func adoptNodeID(o *Options) error {
	path := filepath.Join(o.DataDir, nodeIDFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new directory, or one from a build before the record
	}
	if err != nil {
		return fmt.Errorf("replication: reading %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxNodeID+2)) // an id, its newline, and one byte to see it is longer
	f.Close()
	if err != nil {
		return fmt.Errorf("replication: reading %s: %w", path, err)
	}
	id := string(bytes.TrimSpace(b))
	if id == "" || len(id) > maxNodeID {
		return fmt.Errorf("replication: %s does not hold a node id (%d bytes)", path, len(b))
	}
	switch {
	case o.idDefault:
		o.NodeID = id
	case o.NodeID != id:
		return fmt.Errorf("%w: %s is node %q, not %q (start it with that --node-id, or give this node its own data directory)", ErrNodeID, o.DataDir, id, o.NodeID)
	}
	return nil
}

// recordNodeID writes the id into the data directory unless it is there:
// at the first start, and at the first start of a directory a build before
// the record wrote (with the id that build would have used now too).
func recordNodeID(dir, id string) error {
	path := filepath.Join(dir, nodeIDFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, id+"\n")
		return err
	})
}

// moveOwnAddress brings the leader's own Raft address in the configuration
// up to date after a restart on another address (its id kept by the data
// directory): the address peers and snapshots are sent to.
func (n *Node) moveOwnAddress() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	want := raft.ServerAddress(n.opts.RaftAdvertise)
	for _, s := range f.Configuration().Servers {
		if s.ID != raft.ServerID(n.opts.NodeID) || s.Address == want {
			continue
		}
		if s.Suffrage != raft.Voter {
			return
		}
		err := n.raft.AddVoter(s.ID, want, f.Index(), 5*time.Second).Error()
		n.log.Info("own raft address updated in the configuration", "from", string(s.Address), "to", string(want), "err", err)
		return
	}
}
