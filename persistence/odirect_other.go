//go:build !linux

package persistence

import (
	"errors"
	"os"
)

// No O_DIRECT off Linux: the base reads through the filesystem.
func openDirect(string) *os.File { return nil }

func preadDirect(*os.File, []byte, int64) (int, error) { return 0, errors.ErrUnsupported }
