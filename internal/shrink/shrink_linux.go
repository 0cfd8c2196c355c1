package shrink

import (
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func linkCount(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

func truncate(f vfs.File, size int64) error { return syscall.Ftruncate(int(f.Fd()), size) }
