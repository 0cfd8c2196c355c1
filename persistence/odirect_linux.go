package persistence

import (
	"os"
	"syscall"
)

// openDirect opens path for reading with O_DIRECT, or returns nil (a
// filesystem without it: tmpfs).
func openDirect(path string) *os.File {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return f
}

// preadDirect is one pread(2): with O_DIRECT a short read's remainder
// would be unaligned, so the caller decides, not a loop.
func preadDirect(f *os.File, b []byte, off int64) (int, error) {
	for {
		n, err := syscall.Pread(int(f.Fd()), b, off)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
