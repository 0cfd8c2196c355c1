//go:build !linux

package shrink

import (
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func linkCount(os.FileInfo) (uint64, bool) { return 0, false }

func truncate(vfs.File, int64) error { return errors.ErrUnsupported }
