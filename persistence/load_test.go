package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/keyspace"
)

func bfAdd(k *keyspace.Keyspace, key, prefix string, n int) {
	k.Apply(&command.Cmd{Op: command.BFAdd, Key: []byte(key), Items: items(prefix, n), Multi: true, ErrorRate: 0.01, Capacity: 1000, Expansion: 2, MaxBytes: 1 << 30})
}

// TestLoadDamagedTable: a flipped byte in a table's chunks fails the load
// with an error, never a panic, a hang or a filter loaded with it.
func TestLoadDamagedTable(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	k := keyspace.New()
	k.TrackChanges()
	bfAdd(k, "b", "a", 200000)
	if err := write(s, k, nil, 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.SortFunc(tables, func(a, b string) int { return int(fileSize(t, b) - fileSize(t, a)) })
	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	off := fileSize(t, tables[0]) / 3 // among the data blocks
	f.ReadAt(b[:], off)
	b[0] ^= 0x40
	f.WriteAt(b[:], off)
	f.Close()

	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Load()
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "checksum") && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("loading a damaged table: %v", err)
	}
	t.Log(err)
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
