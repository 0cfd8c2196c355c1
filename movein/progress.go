package movein

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// reporter shows a run's progress: a progress bar (schollz/progressbar)
// when stderr is a terminal, structured log lines (log/slog, text or JSON)
// otherwise. Progress is counted in one unit (bytes or items) against a
// total that may be unknown (-1).
type reporter struct {
	log   *slog.Logger
	bar   *progressbar.ProgressBar
	unit  string
	total int64
	every time.Duration

	mu    sync.Mutex
	start time.Time
	last  time.Time
	done  int64
}

// logOptions are the flags every subcommand shares.
type logOptions struct {
	format   string // text or json
	progress string // auto, bar or log
	every    time.Duration
	verbose  bool
}

func newReporter(stderr io.Writer, o logOptions, unit string) (*reporter, error) {
	useBar := false
	switch o.progress {
	case "auto":
		f, ok := stderr.(*os.File)
		useBar = ok && term.IsTerminal(int(f.Fd()))
	case "bar":
		useBar = true
	case "log":
	default:
		return nil, fmt.Errorf("--progress must be auto, bar or log, not %q", o.progress)
	}
	r := &reporter{unit: unit, total: -1, every: o.every, start: time.Now()}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	w := stderr
	if useBar {
		// The bar owns the terminal line; log lines (warnings and errors
		// only) clear it first and it redraws on its next update.
		level = slog.LevelWarn
		w = &barWriter{r: r, w: stderr}
	}
	hopt := &slog.HandlerOptions{Level: level}
	switch o.format {
	case "text":
		r.log = slog.New(slog.NewTextHandler(w, hopt))
	case "json":
		r.log = slog.New(slog.NewJSONHandler(w, hopt))
	default:
		return nil, fmt.Errorf("--log-format must be text or json, not %q", o.format)
	}
	if useBar {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }),
		}
		if unit == "bytes" {
			opts = append(opts, progressbar.OptionShowBytes(true))
		} else {
			opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit))
		}
		r.bar = progressbar.NewOptions64(-1, opts...)
	}
	return r, nil
}

type barWriter struct {
	r *reporter
	w io.Writer
}

func (b *barWriter) Write(p []byte) (int, error) {
	if b.r.bar != nil {
		b.r.bar.Clear()
	}
	return b.w.Write(p)
}

// setTotal sets the total once it is known.
func (r *reporter) setTotal(total int64) {
	r.mu.Lock()
	r.total = total
	r.start = time.Now()
	r.last = time.Time{}
	r.mu.Unlock()
	if r.bar != nil {
		r.bar.ChangeMax64(total)
	}
}

// update records done units; desc describes the count of keys or items for
// the bar, and attrs go on the periodic log line.
func (r *reporter) update(done int64, desc string, attrs ...any) {
	r.mu.Lock()
	r.done = done
	now := time.Now()
	due := now.Sub(r.last) >= r.every
	if due {
		r.last = now
	}
	total, start := r.total, r.start
	r.mu.Unlock()
	if r.bar != nil {
		r.bar.Describe(desc)
		r.bar.Set64(done)
		return
	}
	if !due {
		return
	}
	r.log.Info("progress", r.rateAttrs(done, total, now.Sub(start), attrs)...)
}

func (r *reporter) rateAttrs(done, total int64, el time.Duration, attrs []any) []any {
	var out []any
	for i := 0; i+1 < len(attrs); i += 2 {
		if attrs[i] != r.unit { // the unit's own count comes next
			out = append(out, attrs[i], attrs[i+1])
		}
	}
	out = append(out, slog.Int64(r.unit, done))
	if total >= 0 {
		out = append(out, slog.Int64(r.unit+"_total", total))
	}
	secs := el.Seconds()
	if secs > 0 {
		out = append(out, slog.Int64(r.unit+"_per_s", int64(math.Round(float64(done)/secs))))
	}
	if total > 0 && done > 0 && done <= total {
		eta := time.Duration(float64(el) * float64(total-done) / float64(done))
		out = append(out, slog.Float64("eta_s", eta.Round(100*time.Millisecond).Seconds()))
	}
	out = append(out, slog.Float64("elapsed_s", el.Round(time.Millisecond).Seconds()))
	return out
}

// event logs one step (a key copied, a batch sent) in log mode.
func (r *reporter) event(level slog.Level, msg string, attrs ...any) {
	r.log.Log(context.Background(), level, msg, attrs...)
}

// finish ends the bar and logs the final line with the overall rate.
func (r *reporter) finish(msg string, attrs ...any) {
	r.mu.Lock()
	done, total, el := r.done, r.total, time.Since(r.start)
	r.mu.Unlock()
	if r.bar != nil {
		if total >= 0 {
			r.bar.Set64(total)
		}
		r.bar.Finish()
		return
	}
	r.log.Info(msg, r.rateAttrs(done, total, el, attrs)...)
}
