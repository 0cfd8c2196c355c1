//go:build failpoints

package replication

import (
	"os"
	"path/filepath"
	"time"
)

// failpoint, in a build with the failpoints tag (tests only), stops at a
// named place once a test arms it: with BFSERVER_FAILPOINT_DIR set and the
// file NAME.arm in it, the next goroutine to pass removes it, writes
// NAME.hit and waits until NAME.release appears. A test can then pause
// the process (SIGSTOP) exactly there.
func failpoint(name string) {
	dir := os.Getenv("BFSERVER_FAILPOINT_DIR")
	if dir == "" {
		return
	}
	arm := filepath.Join(dir, name+".arm")
	if os.Remove(arm) != nil {
		return // not armed, or another goroutine took it
	}
	os.WriteFile(filepath.Join(dir, name+".hit"), nil, 0o600)
	release := filepath.Join(dir, name+".release")
	for {
		if os.Remove(release) == nil {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling for the test's release
	}
}
