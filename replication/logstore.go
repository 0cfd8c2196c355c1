package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Log stores (Options.LogStore). Each keeps the Raft log and Raft's stable
// values (term, vote) of a data directory in a place of its own, and a
// directory holds one: a start that finds the other kind moves its log
// into the kind asked for first (openLogStore).
const (
	// LogStoreWAL is hashicorp/raft-wal in DataDir/wal: segment files
	// appended to with one fsync per batch (walstore.go).
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb/v2 in DataDir/raft.db: a bbolt B+tree,
	// two fdatasyncs per batch (its pages, then its meta page).
	LogStoreBolt = "bolt"
)

// logStore is a data directory's Raft log and stable store.
type logStore interface {
	raft.LogStore
	raft.StableStore
	// Sync makes every entry stored so far durable, whatever the policy.
	Sync() error
	Close() error
}

// logStorePath is where a kind of store lives in a data directory.
func logStorePath(dir, kind string) string {
	if kind == LogStoreBolt {
		return filepath.Join(dir, "raft.db")
	}
	return filepath.Join(dir, "wal")
}

func otherLogStore(kind string) string {
	if kind == LogStoreBolt {
		return LogStoreWAL
	}
	return LogStoreBolt
}

// openStoreAt opens (creating) a store of a kind at path; sync: every
// append is synced before it returns.
func openStoreAt(path, kind string, sync bool, log *slog.Logger) (logStore, error) {
	if kind == LogStoreWAL {
		return openWAL(path, sync, log)
	}
	// The freelist is rebuilt on open instead of written on every
	// commit: with a log of many pages, writing it made each commit slow.
	return raftboltdb.New(raftboltdb.Options{
		Path: path, NoSync: !sync,
		BoltOptions: &bbolt.Options{Timeout: lockWait, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// openLogStore opens the Raft log of dir in the kind asked for. A log of
// the other kind (a directory written before the kind changed) is moved
// into it first, and removed once the copy is complete:
//
//  1. the copy is written beside it, at the new kind's path + ".new",
//     and synced;
//  2. renamed into place, and the directory synced: from here the new
//     store is the log;
//  3. the old one is renamed to its path + ".old", the directory synced,
//     and removed.
//
// A crash before 2 leaves the old log, and the next start copies again;
// one after it leaves both, the same entries in each, and the next start
// keeps the kind asked for. What ".new" and ".old" a crash left behind
// is removed, under the store's lock.
func openLogStore(dir, kind string, sync bool, log *slog.Logger) (logStore, error) {
	want, other := logStorePath(dir, kind), logStorePath(dir, otherLogStore(kind))
	hadWant, hadOther := exists(want), exists(other)
	if !hadWant && hadOther {
		if err := moveLog(dir, otherLogStore(kind), kind, log); err != nil {
			return nil, fmt.Errorf("moving the raft log from %s to %s: %w (start with --raft-log-store %s to keep it as it is)",
				other, want, err, otherLogStore(kind))
		}
	}
	s, err := openStoreAt(want, kind, sync, log)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{want + ".new", other + ".new", want + ".old", other + ".old"} {
		if err == nil && exists(p) {
			err = os.RemoveAll(p)
		}
	}
	if err == nil && hadWant && hadOther {
		log.Info("raft log: removing the copy a move left behind", "path", other)
		err = retire(other)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// retire renames a store out of the way (atomically, so no half-removed
// store is ever taken for the log) and removes it.
func retire(path string) error {
	if err := os.RemoveAll(path + ".old"); err != nil {
		return err
	}
	if err := os.Rename(path, path+".old"); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	return os.RemoveAll(path + ".old")
}

// moveLog copies dir's log of kind from into a new store of kind to, and
// makes that the log (see openLogStore).
func moveLog(dir, from, to string, log *slog.Logger) error {
	began := time.Now()
	src, err := openStoreAt(logStorePath(dir, from), from, true, log)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := logStorePath(dir, to) + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	// Unsynced appends, synced once at the end: a crash leaves ".new".
	dst, err := openStoreAt(tmp, to, false, log)
	if err != nil {
		return err
	}
	first, last, n, err := copyLog(src, dst)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, logStorePath(dir, to))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return err
	}
	log.Info("raft log moved", "from", from, "to", to, "entries", n, "first", first, "last", last, "took", time.Since(began).Round(time.Millisecond))
	src.Close()
	return retire(logStorePath(dir, from))
}

// stableKeys are the stable store's keys Raft uses (raft.go), and whether
// each holds a number (SetUint64: the stores encode numbers differently,
// raft-boltdb big-endian and raft-wal little-endian).
var stableKeys = []struct {
	key    []byte
	number bool
}{{[]byte("CurrentTerm"), true}, {[]byte("LastVoteTerm"), true}, {[]byte("LastVoteCand"), false}}

// copyLog copies Raft's stable values and every entry of src into the
// empty dst, as they are (their checksums included). A bolt log may have
// a gap: a follower that installed a snapshot keeps the entries before it
// that its trailing logs covered, and appends after the snapshot's index.
// What precedes the last gap is covered by that snapshot, and a log that
// must be contiguous (raft-wal) starts after it.
func copyLog(src, dst logStore) (first, last, n uint64, err error) {
	for _, k := range stableKeys {
		v, err := src.Get(k.key)
		if errors.Is(err, raftboltdb.ErrKeyNotFound) || (err == nil && v == nil) {
			continue
		}
		if err == nil && k.number {
			var u uint64
			if u, err = src.GetUint64(k.key); err == nil {
				err = dst.SetUint64(k.key, u)
			}
		} else if err == nil {
			err = dst.Set(k.key, v)
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("stable value %s: %w", k.key, err)
		}
	}
	if first, err = src.FirstIndex(); err != nil {
		return
	}
	if last, err = src.LastIndex(); err != nil || last == 0 {
		return
	}
	var batch []*raft.Log
	bytes := 0
	flush := func() error {
		err := dst.StoreLogs(batch)
		n += uint64(len(batch))
		batch, bytes = batch[:0], 0
		return err
	}
	copied := false
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err = src.GetLog(i, l); errors.Is(err, raft.ErrLogNotFound) {
			if err = flush(); err != nil {
				return
			}
			// A gap: find where the entries go on, and start there.
			for i++; i <= last; i++ {
				if err = src.GetLog(i, l); !errors.Is(err, raft.ErrLogNotFound) {
					break
				}
			}
			if err != nil {
				return first, last, n, fmt.Errorf("entry %d: %w", i, err)
			}
			if copied {
				if err = dst.DeleteRange(first, i-1); err != nil {
					return
				}
			}
			first, n = i, 0
		} else if err != nil {
			return first, last, n, fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		bytes += len(l.Data)
		copied = true
		if len(batch) == 256 || bytes >= 4<<20 {
			if err = flush(); err != nil {
				return
			}
		}
	}
	if err = flush(); err != nil {
		return
	}
	got1, err1 := dst.FirstIndex()
	got2, err2 := dst.LastIndex()
	if err = errors.Join(err1, err2); err == nil && (got1 != first || got2 != last) {
		err = fmt.Errorf("the copy holds entries %d to %d, not %d to %d", got1, got2, first, last)
	}
	return
}
