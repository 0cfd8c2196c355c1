package main

import (
	"runtime"
	"testing"

	"github.com/bfserver/bfserver/command"
)

// TestFilterCap: an explicit --max-filter-bytes wins; unset, the cap is
// --maxmemory, else the node's memory, at most 1 TiB; unknown memory falls
// back to 512 MiB.
func TestFilterCap(t *testing.T) {
	mem := func(n uint64) func() (uint64, string) { return func() (uint64, string) { return n, "machine memory" } }
	cases := []struct {
		set, maxMemory, machine uint64
		want                    uint64
		from                    string
	}{
		{64 << 20, 0, 24 << 30, 64 << 20, "max-filter-bytes"},
		{64 << 20, 1 << 30, 24 << 30, 64 << 20, "max-filter-bytes"},
		{0, 2 << 30, 24 << 30, 2 << 30, "maxmemory"},
		{0, 2 << 40, 24 << 30, command.MaxFilterBytes, "maxmemory"},
		{0, 0, 24 << 30, 24 << 30, "machine memory"},
		{0, 0, 4 << 40, command.MaxFilterBytes, "machine memory"},
		{0, 0, 0, 512 << 20, "fallback (the node's memory is unknown)"},
	}
	for _, c := range cases {
		got, from := filterCap(c.set, c.maxMemory, mem(c.machine))
		if got != c.want || from != c.from {
			t.Errorf("filterCap(%d, %d, %d) = %d from %q, want %d from %q", c.set, c.maxMemory, c.machine, got, from, c.want, c.from)
		}
	}
}

func TestMemoryFiles(t *testing.T) {
	if got := meminfoTotal("MemTotal:       24576000 kB\nMemFree:  1 kB\n"); got != 24576000<<10 {
		t.Errorf("MemTotal = %d", got)
	}
	if got := meminfoTotal("MemFree:  1 kB\n"); got != 0 {
		t.Errorf("no MemTotal = %d", got)
	}
	for text, want := range map[string]uint64{"max\n": 0, "1073741824\n": 1 << 30, "9223372036854771712\n": 0, "": 0, "0": 0} {
		if got, ok := cgroupLimit(text); got != want || ok != (want != 0) {
			t.Errorf("cgroupLimit(%q) = %d, %v", text, got, ok)
		}
	}
	files := cgroupLimitFiles("0::/system.slice/bf.service\n4:memory:/docker/abc\n3:cpu,cpuacct:/x\n")
	want := map[string]bool{
		"/sys/fs/cgroup/memory.max": true, "/sys/fs/cgroup/memory/memory.limit_in_bytes": true,
		"/sys/fs/cgroup/system.slice/bf.service/memory.max":      true,
		"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": true,
	}
	if len(files) != len(want) {
		t.Errorf("files %q", files)
	}
	for _, f := range files {
		if !want[f] {
			t.Errorf("unexpected %q", f)
		}
	}
	if runtime.GOOS == "linux" {
		if n, from := nodeMemory(); n == 0 || from == "" {
			t.Errorf("nodeMemory on Linux = %d, %q", n, from)
		}
	}
}
