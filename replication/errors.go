package replication

import (
	"errors"

	"github.com/bfserver/bfserver/command"
)

// The package's own errors. Outcomes of writes and reads are the command
// package's (command.ErrNoLeader and the rest), so the RESP layer maps one
// set whatever node the write crossed.
var (
	// errLeaseRefused: this leader grants no leases (NoReadLease or
	// NoFollowerLease).
	errLeaseRefused = errors.New("read leases are off on this leader")
	// errNotMember: the requester is not a member of the cluster.
	errNotMember = errors.New("unknown node id")
	// errTellAhead: a committed index beyond this node's log.
	errTellAhead = errors.New("committed index out of range")
	// errNotLeader: a commit notice from a node this one does not follow.
	errNotLeader = errors.New("commit notice from a node that is not the leader")
	// errForbidden: a peer forwarded a command no RESP layer proposes
	// (membership changes travel their own way).
	errForbidden = errors.New("forwarded command not allowed")
	// errHalted: this node met a log entry it cannot apply and stopped.
	errHalted = errors.New("this node stopped at a log entry it cannot apply")
	// errBadFrame: a peer message does not decode.
	errBadFrame = errors.New("malformed peer message")
	// errSnapshotRunning: a snapshot is already being taken.
	errSnapshotRunning = errors.New("a snapshot is already in progress")
	// errEarlierCommit: an image table not committed because the table of
	// a cut taken before it failed to commit (fsm.commit).
	errEarlierCommit = errors.New("an earlier image table failed to commit")
	// ErrNoBackupDir: BFBACKUP on a node given no backup directory
	// (Options.BackupDir): it writes nowhere the operator did not allow.
	ErrNoBackupDir = errors.New("no backup directory is configured: start the node with --backup-dir (backup-dir in a config file) to allow BFBACKUP")
	// ErrBackupPath: a BFBACKUP path outside the backup directory ("..",
	// an absolute path elsewhere, a link leading out), or in the data
	// directory.
	ErrBackupPath = errors.New("the path must name a file inside the backup directory (--backup-dir)")
	// errImageBehind: a snapshot of this node's own refers to its image
	// (snapshotStore), and the image is behind the snapshot's index: the
	// state the snapshot stands for is not on this node.
	errImageBehind = errors.New("the image is behind this node's snapshot that refers to it: wipe the node's data directory and let it rejoin, or restore a backup (docs/OPERATIONS.md)")
	// errClosed ends a reference snapshot's stream (refStream) when its
	// reader is closed before the end.
	errClosed = errors.New("snapshot stream closed")
	// ErrNodeID: the node id given is not the one the data directory
	// records (its node-id file): a data directory belongs to one member.
	ErrNodeID = errors.New("replication: the data directory belongs to another node id")
)

// peerErrors numbers the errors that cross the peer protocol, so that each
// side knows the other's outcome by its code, never by its text. Append
// only: the codes are on the wire between nodes of different builds.
var peerErrors = []error{
	nil,
	command.ErrNoLeader,
	command.ErrNotAccepted,
	command.ErrLeadershipLost,
	command.ErrLogTimeout,
	command.ErrConnLost,
	command.ErrReadTimeout,
	errLeaseRefused,
	errNotMember,
	errTellAhead,
	errForbidden,
	errHalted,
	errBadFrame,
	errNotLeader,
}

// Codes for errors that carry text of their own.
const (
	codeStorage = 100 + iota // command.StorageError: the text is its cause
	codeInvalid              // command.InvalidError: the text is its reason, after the op
	codeRemote               // any other error (a Raft membership failure): its text
)

// RemoteError is a peer's error that has no code of its own.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }
