package main

import (
	"bytes"
	"log/slog"
	"strings"
	"syscall"
	"testing"
)

// fakeNofile is a limit a process without privileges has: the soft limit
// may rise to the hard one, no further.
type fakeNofile struct{ cur, max uint64 }

func (f *fakeNofile) get() (uint64, uint64, error) { return f.cur, f.max, nil }
func (f *fakeNofile) set(cur, max uint64) error {
	if max > f.max || cur > max {
		return syscall.EPERM
	}
	f.cur, f.max = cur, max
	return nil
}

// TestFitDescriptors: the soft limit is raised as far as needed and
// allowed; maxclients is lowered, with Redis's messages, only when the
// hard limit leaves too little, and a limit below the reserve fails.
func TestFitDescriptors(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	lim := &fakeNofile{cur: 1024, max: 1 << 20}
	b, err := fitDescriptors(lim, 10000, 256, false, log)
	want := 10000 + 32 + 512 + 1000
	if err != nil || b.maxClients != 10000 || b.imageFiles != 1000 || lim.cur != uint64(want) || lim.max != 1<<20 {
		t.Fatalf("plenty: %+v, %v, limit %+v", b, err, lim)
	}
	if !strings.Contains(logs.String(), "Increased maximum number of open files to 11544 (it was originally set to 1024).") {
		t.Fatalf("log: %s", logs.String())
	}

	logs.Reset()
	lim = &fakeNofile{cur: 256, max: 256}
	b, err = fitDescriptors(lim, 10000, 16, false, log)
	// image: 256/4 = 64 → at least 74; 256 - (32 + 32 + 74) = 118.
	if err != nil || b.maxClients != 118 || b.clientFDs != 118 || b.imageFiles != 74 {
		t.Fatalf("256: %+v, %v", b, err)
	}
	for _, msg := range []string{
		"You requested maxclients of 10000 requiring at least 11064 max file descriptors.",
		"Server can't set maximum open files to 11064 because of OS error: operation not permitted.",
		"Current maximum open files is 256. maxclients has been reduced to 118 to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
	} {
		if !strings.Contains(logs.String(), msg) {
			t.Fatalf("log lacks %q:\n%s", msg, logs.String())
		}
	}

	// The soft limit rises to the hard one when that is all there is.
	lim = &fakeNofile{cur: 1024, max: 4096}
	if b, err = fitDescriptors(lim, 10000, 256, false, log); err != nil || lim.cur != 4096 || b.maxClients != 4096-32-512-1000 {
		t.Fatalf("4096: %+v, %v, limit %+v", b, err, lim)
	}
	// In memory: Redis's reserve only.
	lim = &fakeNofile{cur: 256, max: 256}
	if b, err = fitDescriptors(lim, 10000, 256, true, log); err != nil || b.maxClients != 224 {
		t.Fatalf("in memory: %+v, %v", b, err)
	}
	// Nothing left for clients.
	lim = &fakeNofile{cur: 256, max: 256}
	if _, err = fitDescriptors(lim, 10000, 256, false, log); err == nil || !strings.Contains(err.Error(), "Your current 'ulimit -n' of 256 is not enough") {
		t.Fatalf("too low: %v", err)
	}
}
