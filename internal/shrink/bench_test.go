package shrink

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkFsyncBesideRemoval times a small write and fsync in a loop (a
// Raft log's sync) while a synced 1 GiB file is removed, at once
// (unlink) or by FS.Remove: it reports the slowest fsync seen and how
// long the removal took, and the slowest fsync of a quiet window of 2 s
// before it (the disk's own floor). Run it on the disk a node uses:
//
//	go test ./internal/shrink -run '^$' -bench FsyncBesideRemoval -benchtime 1x
func BenchmarkFsyncBesideRemoval(b *testing.B) {
	for _, c := range []struct {
		name   string
		remove func(string) error
	}{{"unlink", os.Remove}, {"steps", FS{vfs.Default}.Remove}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			big := filepath.Join(dir, "big")
			for range b.N {
				b.StopTimer()
				writeSynced(b, big, 1<<30)
				log, err := os.Create(filepath.Join(dir, "log"))
				if err != nil {
					b.Fatal(err)
				}
				// The log's syncs in a loop; each window's slowest is sent
				// when asked (tick).
				tick, worst := make(chan bool), make(chan time.Duration)
				go func() {
					var w time.Duration
					rec := make([]byte, 200)
					for {
						select {
						case more := <-tick:
							worst <- w
							if !more {
								return
							}
							w = 0
						default:
						}
						t := time.Now()
						log.Write(rec)
						log.Sync()
						w = max(w, time.Since(t))
					}
				}()
				// Let the disk settle after the file's write, then time a
				// quiet window (the floor) and the removal's.
				time.Sleep(2 * time.Second)
				tick <- true
				<-worst
				time.Sleep(2 * time.Second)
				tick <- true
				floor := <-worst
				b.StartTimer()
				began := time.Now()
				if err := c.remove(big); err != nil {
					b.Fatal(err)
				}
				took := time.Since(began)
				// The freed blocks' commit may come after the unlink returns.
				time.Sleep(2 * time.Second)
				tick <- false
				b.ReportMetric(float64((<-worst).Microseconds())/1000, "max-fsync-ms")
				b.ReportMetric(float64(floor.Microseconds())/1000, "quiet-max-fsync-ms")
				b.ReportMetric(took.Seconds(), "remove-s")
				log.Close()
			}
		})
	}
}

func writeSynced(b *testing.B, name string, size int) {
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for range size / len(buf) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}
