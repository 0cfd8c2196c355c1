// Package ratelog logs a warning that may repeat without bound (every
// refused connection, every failed accept) at most once a second.
package ratelog

import (
	"log/slog"
	"sync"
	"time"
)

// Log logs at most once a second, with how many were left out since the
// last. The zero value is ready.
type Log struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

// Warn logs msg and args at warning level unless one was logged less than
// a second ago.
func (r *Log) Warn(l *slog.Logger, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < time.Second {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.skipped = now, 0
	r.mu.Unlock()
	if skipped > 0 {
		args = append(args, "more_since_last_logged", skipped)
	}
	l.Warn(msg, args...)
}
