package replication

import (
	"log/slog"
	"testing"
)

// openLogForTest opens the log store a data directory holds, as it is.
func openLogForTest(t testing.TB, dir string) logStore {
	t.Helper()
	kind := LogStoreBolt
	if exists(logStorePath(dir, LogStoreWAL)) {
		kind = LogStoreWAL
	}
	s, err := openStoreAt(logStorePath(dir, kind), kind, true, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
