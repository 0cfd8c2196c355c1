package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bfserver/bfserver/command"
)

// fallbackFilterCap is the per-filter cap where the node's memory cannot be
// read (not Linux): the cap of earlier versions.
const fallbackFilterCap = 512 << 20

// filterCap resolves --max-filter-bytes. Set (non-zero), it is the cap.
// Unset, the cap follows the node's memory as RedisBloom's does (it may
// create any filter its allocator grants): --maxmemory when set, else the
// memory of the machine or of the cgroup the process runs in, whichever is
// smaller; at most command.MaxFilterBytes. It says where the number came
// from, for the start-up log.
func filterCap(set, maxMemory uint64, mem func() (uint64, string)) (uint64, string) {
	switch {
	case set != 0:
		return set, "max-filter-bytes"
	case maxMemory != 0:
		return min(maxMemory, command.MaxFilterBytes), "maxmemory"
	}
	n, from := mem()
	if n == 0 {
		return fallbackFilterCap, "fallback (the node's memory is unknown)"
	}
	return min(n, command.MaxFilterBytes), from
}

// nodeMemory is the memory this process may use, and where that was read:
// the machine's (MemTotal in /proc/meminfo), or its cgroup's limit when
// lower (memory.max of cgroup v2, memory.limit_in_bytes of v1). 0 where
// none can be read.
func nodeMemory() (uint64, string) {
	total := meminfoTotal(readFile("/proc/meminfo"))
	from := "machine memory"
	self := readFile("/proc/self/cgroup")
	for _, path := range cgroupLimitFiles(self) {
		if n, ok := cgroupLimit(readFile(path)); ok && (total == 0 || n < total) {
			total, from = n, "cgroup memory limit ("+path+")"
		}
	}
	return total, from
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// meminfoTotal reads MemTotal from /proc/meminfo's text, in bytes; 0 if
// absent.
func meminfoTotal(text string) uint64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			if len(f) >= 3 && strings.EqualFold(f[2], "kB") {
				n <<= 10
			}
			return n
		}
	}
	return 0
}

// cgroupLimitFiles lists the memory-limit files that may apply to this
// process, from /proc/self/cgroup's text: its own cgroup's (v2 "0::/path",
// v1 "N:…memory…:/path") and the mount roots (inside a container the
// process's cgroup is usually the root of the namespace).
func cgroupLimitFiles(self string) []string {
	files := []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
	sc := bufio.NewScanner(strings.NewReader(self))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") || parts[2] == "/" {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			files = append(files, filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"))
		case containsWord(parts[1], "memory"):
			files = append(files, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
		}
	}
	return files
}

func containsWord(list, w string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == w {
			return true
		}
	}
	return false
}

// cgroupLimit parses a memory-limit file: a number of bytes, or "max" (no
// limit, as is v1's page-rounded 2^63−1).
func cgroupLimit(text string) (uint64, bool) {
	s := strings.TrimSpace(text)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}
