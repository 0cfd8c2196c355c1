// Command dedup is a worked example of de-duplicating an event stream
// with a sliding-window filter in bfserver (BFX.W*), beside the
// rotating-keys workaround it replaces (two Bloom filters with TTLs and a
// double lookup, as users of RedisBloom build it).
//
// It reads event ids, one a line, from stdin and writes to stdout those
// not seen within the window, in order; a summary goes to stderr.
//
//	dedup --window 1h --capacity 1000000 --error-rate 0.001 < events > unique
//	dedup --count 100000 < events > unique        # the last 100,000 events
//	dedup --mode rotate --window 1h --capacity 1000000 < events > unique
//
// Lines are sent in batches of up to --batch ids (one round trip each),
// and a batch goes as soon as stdin has nothing more buffered, so a slow
// stream is answered line by line. A line may carry more after a tab:
// the id is what comes before it, and the whole line is written.
// See README.md.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	redisURL := flag.String("redis", "redis://127.0.0.1:6379", "bfserver URL (the rotating mode also runs on RedisBloom)")
	key := flag.String("key", "events:seen", "the window's key (rotate: the prefix of the per-period filters)")
	mode := flag.String("mode", "window", "window (BFX.W*, bfserver) or rotate (two Bloom filters, the workaround)")
	window := flag.Duration("window", time.Hour, "forget an id after this long")
	count := flag.Int64("count", 0, "window mode: forget an id after this many later events instead of a duration")
	capacity := flag.Int64("capacity", 1_000_000, "the events expected within one window")
	errorRate := flag.Float64("error-rate", 0.001, "at most this fraction of new ids is taken for a duplicate")
	batch := flag.Int("batch", 1000, "most ids per round trip")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		fail(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	var d Deduper
	switch *mode {
	case "window":
		d = NewWindow(rdb, *key, *window, *count, *capacity, *errorRate)
	case "rotate":
		if *count > 0 {
			fail(fmt.Errorf("--count: the rotating filters rotate by time only"))
		}
		d = NewRotating(rdb, *key, *window, *capacity, *errorRate)
	default:
		fail(fmt.Errorf("--mode %q: window or rotate", *mode))
	}
	st, err := run(ctx, d, os.Stdin, os.Stdout, *batch)
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "dedup: %d events, %d new, %d duplicates, %d commands (%s)\n",
		st.events, st.fresh, st.events-st.fresh, d.Commands(), *mode)
}

type stats struct{ events, fresh int }

// run copies the lines of in whose ids are new to out, in batches.
func run(ctx context.Context, d Deduper, in io.Reader, out io.Writer, batch int) (stats, error) {
	var st stats
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriter(out)
	var lines, ids []string
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		fresh, err := d.New(ctx, ids)
		if err != nil {
			return err
		}
		for i, ok := range fresh {
			if ok {
				st.fresh++
				w.WriteString(lines[i])
				w.WriteByte('\n')
			}
		}
		st.events += len(ids)
		lines, ids = lines[:0], ids[:0]
		return w.Flush()
	}
	for {
		line, err := r.ReadString('\n')
		if line = strings.TrimRight(line, "\r\n"); line != "" {
			id, _, _ := strings.Cut(line, "\t")
			lines, ids = append(lines, line), append(ids, id)
		}
		if err == io.EOF {
			return st, flush()
		}
		if err != nil {
			return st, err
		}
		// A full batch, or nothing more waiting: send what we have.
		if len(ids) >= batch || r.Buffered() == 0 {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "dedup:", err)
	os.Exit(1)
}
