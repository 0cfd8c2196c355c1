package replication

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/hashicorp/raft"
)

// TestCheckedStore: entries are stamped as they are stored; one damaged
// afterwards (its data, its term, its checksum) is handed on marked, with
// the damage reported once per read and the state machine halting at it;
// an entry sent damaged is refused; an entry of an older build (no
// checksum) passes.
func TestCheckedStore(t *testing.T) {
	mem := raft.NewInmemStore()
	var reported []uint64
	s := &checkedStore{LogStore: mem, damaged: func(i uint64, err error) {
		if !errors.Is(err, errDamaged) {
			t.Errorf("entry %d reported with %v", i, err)
		}
		reported = append(reported, i)
	}}
	data := command.EncodeBatch([]*command.Cmd{{Op: command.BFAdd, Key: []byte("k"), Items: [][]byte{[]byte("UNIQUEZZZ-target")}}})
	var logs []*raft.Log
	for i := uint64(1); i <= 4; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: append([]byte(nil), data...)})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	damage := map[uint64]func(l *raft.Log){
		2: func(l *raft.Log) { l.Data[len(l.Data)-8] ^= 1 },
		3: func(l *raft.Log) { l.Term = 7 },
		4: func(l *raft.Log) { l.Extensions[3] ^= 0x80 },
	}
	for i, fn := range damage {
		var l raft.Log
		mem.GetLog(i, &l)
		fn(&l)
		mem.StoreLog(&l)
	}
	legacy := &raft.Log{Index: 5, Term: 1, Type: raft.LogCommand, Data: data}
	mem.StoreLog(legacy)
	for i := uint64(1); i <= 5; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		err := checkEntry(&l)
		if _, bad := damage[i]; bad != (err != nil) {
			t.Fatalf("entry %d: check %v, damaged %v", i, err, bad)
		}
	}
	if len(reported) != 3 {
		t.Fatalf("reported %v, want entries 2, 3 and 4", reported)
	}
	// A leader's entry damaged on its way is refused.
	sent := &raft.Log{Index: 6, Term: 1, Type: raft.LogCommand, Data: append([]byte(nil), data...)}
	stamp(sent)
	sent.Data[0] ^= 1
	var de *damagedError
	if err := s.StoreLogs([]*raft.Log{sent}); !errors.As(err, &de) || de.index != 6 {
		t.Fatalf("a damaged entry sent by the leader: %v", err)
	}
	// The state machine halts at a marked entry and applies nothing.
	f := testFSM(t, memStore(t))
	var marked raft.Log
	s.GetLog(2, &marked)
	f.apply(&marked)
	if f.halt.Load() == nil || f.applied.Load() != 0 {
		t.Fatalf("a damaged entry applied: halt %v, applied %d", f.halt.Load(), f.applied.Load())
	}
}

// TestEntrySumFormula: the checksum is the CRC-32C of the index and term
// (little-endian), the type and the data, as stored entries carry it.
func TestEntrySumFormula(t *testing.T) {
	for _, l := range []raft.Log{{}, {Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")},
		{Index: 1<<64 - 1, Term: 0x0102030405060708, Type: raft.LogConfiguration, Data: make([]byte, 1000)}} {
		h := binary.LittleEndian.AppendUint64(nil, l.Index)
		h = binary.LittleEndian.AppendUint64(h, l.Term)
		h = append(h, byte(l.Type))
		want := crc32.Checksum(append(h, l.Data...), crc32.MakeTable(crc32.Castagnoli))
		if got := entrySum(&l); got != want {
			t.Fatalf("entrySum(%d, %d, %v, %d bytes) = %#x, want %#x", l.Index, l.Term, l.Type, len(l.Data), got, want)
		}
	}
}
