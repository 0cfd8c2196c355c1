// Package shrink removes large files a step at a time.
//
// Why: ext4 frees an unlinked file's blocks (and, mounted with discard,
// trims them) in one journal commit, and every fsync on the filesystem
// waits for that commit. A node removes gigabyte files beside its Raft
// log: a flush's table once Pebble has compacted it, a table or spill
// given up, an old base, an old snapshot's stream. Measured on the
// project's VM: unlinking 1 GiB took 0.5–3 s and an fsync of another file
// beside it up to 520 ms; truncated in 8 MiB steps, each synced, the
// fsync beside it took at most 26 ms (docs/BENCHMARKS.md, "Writes during
// a flush"). Each step frees a little in a commit of its own.
package shrink

import (
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Sizes: a file smaller than Min is removed at once; a larger one shrinks
// by Step a sync.
const (
	Min  = 64 << 20
	Step = 8 << 20
)

// FS is a filesystem whose Remove shrinks a large file first (the one
// Pebble is given: it removes obsolete files on a goroutine of its own,
// never on a write's path, so the steps cost no one a wait).
type FS struct{ vfs.FS }

// Remove shrinks name (File) and removes it.
func (f FS) Remove(name string) error {
	File(f.FS, name)
	return f.FS.Remove(name)
}

// File truncates name to nothing, a Step at a time, each step synced, if
// it is at least Min bytes and has no other name: a table ingested by a
// hard link to its build must keep its bytes when the build's name goes.
// It removes nothing; a failure leaves the rest to the caller's unlink.
// Where the platform cannot tell links or truncate a vfs.File, it does
// nothing. Only for a file already synced: each step's sync would write
// whatever of the file is still dirty.
func File(fs vfs.FS, name string) {
	fi, err := fs.Stat(name)
	if err != nil || fi.Size() < Min || !onlyLink(fi) {
		return
	}
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return
	}
	defer f.Close()
	for size := fi.Size(); size > 0; {
		size = max(size-Step, 0)
		if truncate(f, size) != nil || f.Sync() != nil {
			return
		}
	}
}

func onlyLink(fi os.FileInfo) bool {
	n, ok := linkCount(fi)
	return ok && n == 1
}
