package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
)

// Log entry checksums. raft-boltdb stores what it is given and reads back
// what the disk returns: a flipped bit in an entry's data was replayed as
// another command, silently, and a follower whose copy was damaged
// diverged from the others. So every entry carries a CRC-32C of its index,
// term, type and data in its Extensions, which Raft stores with the entry
// and sends to followers with it but otherwise leaves alone. The leader's
// store stamps each new entry, a follower's store checks each entry it is
// sent (one damaged in transit is refused, and the leader sends it again),
// and every entry read back (replay at start, a follower's apply, the
// leader's sends) is checked; the state machine checks again before it
// applies. A damaged entry stops the node before it applies anything from
// there on (fsm.stop), with its index and the way to recover.
//
// Entries written by builds before these checksums carry no Extensions:
// they are taken unchecked until a snapshot truncates them.

// Extensions: entryMagic, entryCRC, then the CRC-32C little-endian; or
// entryMagic, entryDamaged for an entry that failed its check on reading,
// so that Raft (which stops the process on a read error) carries on to
// hand it to the state machine, which halts there.
const (
	entryMagic   = 0xbf
	entryCRC     = 1
	entryDamaged = 0xff
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// entrySum is the checksum of what an entry means: the CRC-32C of its
// index and term (little-endian), type and data.
func entrySum(l *raft.Log) uint32 {
	// The 17 bytes before the data, a byte at a time from the table: the
	// array crc32.Update is given escapes, an allocation per entry stored
	// and another per entry applied.
	crc := ^uint32(0)
	for i := range 8 {
		crc = crcTable[byte(crc)^byte(l.Index>>(8*i))] ^ crc>>8
	}
	for i := range 8 {
		crc = crcTable[byte(crc)^byte(l.Term>>(8*i))] ^ crc>>8
	}
	crc = crcTable[byte(crc)^byte(l.Type)] ^ crc>>8
	return crc32.Update(^crc, crcTable, l.Data)
}

// errDamaged: a log entry does not match its checksum.
var errDamaged = errors.New("log entry damaged")

// checkEntry reports whether l is intact: nil for an entry with a
// matching checksum or none (an older build's), errDamaged otherwise.
func checkEntry(l *raft.Log) error {
	x := l.Extensions
	switch {
	case len(x) == 0:
		return nil
	case len(x) == 6 && x[0] == entryMagic && x[1] == entryCRC:
		if binary.LittleEndian.Uint32(x[2:]) == entrySum(l) {
			return nil
		}
		return fmt.Errorf("%w: its checksum does not match", errDamaged)
	case len(x) == 2 && x[0] == entryMagic && x[1] == entryDamaged:
		return fmt.Errorf("%w: it could not be read back intact", errDamaged)
	}
	return fmt.Errorf("%w: its checksum is unreadable", errDamaged)
}

// stamp gives l its checksum.
func stamp(l *raft.Log) {
	l.Extensions = binary.LittleEndian.AppendUint32([]byte{entryMagic, entryCRC}, entrySum(l))
}

// checkedStore is the Raft log with checksums. damaged is told of the
// first damaged entry read (the node halts there).
type checkedStore struct {
	raft.LogStore
	damaged func(index uint64, err error)
}

func (s *checkedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *checkedStore) IsMonotonic() bool { return isMonotonic(s.LogStore) }

// StoreLogs stamps entries new to the cluster and checks those sent by a
// leader.
func (s *checkedStore) StoreLogs(logs []*raft.Log) error {
	for _, l := range logs {
		if len(l.Extensions) == 0 {
			stamp(l)
		} else if err := checkEntry(l); err != nil {
			return &damagedError{index: l.Index, err: err}
		}
	}
	return s.LogStore.StoreLogs(logs)
}

// GetLog reads an entry back and checks it. One that fails, or does not
// decode, is handed on marked damaged rather than as an error: Raft panics
// on a read error, and the state machine's halt names the entry and what
// to do.
func (s *checkedStore) GetLog(index uint64, l *raft.Log) error {
	err := s.LogStore.GetLog(index, l)
	if errors.Is(err, raft.ErrLogNotFound) {
		return err
	}
	if err == nil {
		err = checkEntry(l)
	} else {
		err = fmt.Errorf("%w: it does not decode (%v)", errDamaged, err)
	}
	if err != nil {
		if s.damaged != nil {
			s.damaged(index, err)
		}
		*l = raft.Log{Index: index, Type: raft.LogCommand, Extensions: []byte{entryMagic, entryDamaged}}
	}
	return nil
}

// damagedError is an entry a leader sent that failed its check.
type damagedError struct {
	index uint64
	err   error
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("log entry %d sent by the leader: %v", e.index, e.err)
}
func (e *damagedError) Unwrap() error { return e.err }

// damagedLog is the error a node stops with at a damaged entry.
func damagedLog(index uint64, cause error) error {
	return fmt.Errorf("raft log entry %d is damaged (%v): this node stops before applying anything from it on. "+
		"To recover a member of a cluster, stop it, empty its data directory and start it again with --join to a member: it copies the state from the others. "+
		"A single node: restore it from a backup (BFBACKUP, bfserver restore)", index, cause)
}
