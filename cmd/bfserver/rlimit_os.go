//go:build linux || darwin

package main

import "syscall"

// osNofile is the process's RLIMIT_NOFILE.
type osNofile struct{}

func (osNofile) get() (uint64, uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	return uint64(r.Cur), uint64(r.Max), nil
}

func (osNofile) set(cur, max uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: cur, Max: max})
}
