package server

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bfserver/bfserver/internal/ascii"
)

// SAVE, BGSAVE, LASTSAVE, SHUTDOWN and DEBUG. A replicated node saves by
// taking a Raft snapshot of itself (Cluster.Snapshot): its image is
// written and frozen and the log before it may be truncated; LASTSAVE is
// when its latest snapshot completed. A server without a log
// (--in-memory) has nothing to save to: SAVE and BGSAVE answer an error
// that says so, and LASTSAVE is when it started.

const msgInMemorySave = "ERR this server keeps its filters in memory only (--in-memory): there is nothing to save them to"

// saveState is what INFO persistence reports of SAVE and BGSAVE.
type saveState struct {
	mu      sync.Mutex
	running bool
	bg      bool
	started time.Time
	// failed: the latest BGSAVE failed and no save succeeded since (a
	// successful SAVE sets Redis's lastbgsave_status to ok too); bgDur is
	// the latest BGSAVE's time, 0 before any.
	failed bool
	bgDur  time.Duration
	saves  int64
}

func (st *saveState) begin(bg bool) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.running {
		return false
	}
	st.running, st.bg, st.started = true, bg, time.Now()
	return true
}

func (st *saveState) end(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.running = false
	if st.bg {
		st.bgDur = max(time.Since(st.started), time.Nanosecond)
		st.failed = err != nil
	}
	if err == nil {
		st.failed = false
		st.saves++
	}
}

// save takes a snapshot now; the caller holds saveState.
func (s *Server) save() error {
	err := s.cluster.Snapshot(s.ctx)
	s.adm.saves.end(err)
	if err == nil {
		s.adm.changes.Store(0)
	} else {
		s.opts.Logger.Error("save failed", "err", err)
	}
	return err
}

// lastSave is LASTSAVE's time.
func (s *Server) lastSave() time.Time {
	if s.cluster != nil {
		return s.cluster.LastSnapshot()
	}
	return s.start
}

func registerPersist() {
	conn("save", 1, nil, nil, cmdSave)
	conn("bgsave", -1, nil, nil, cmdBgsave)
	conn("lastsave", 1, nil, nil, func(s *session, a [][]byte) {
		s.w.Int(s.srv.lastSave().Unix())
	})
	conn("shutdown", -1, nil, nil, cmdShutdown)
	conn("debug", -2, nil, nil, cmdDebug)
}

func cmdSave(s *session, a [][]byte) {
	if s.srv.cluster == nil {
		s.w.Error(msgInMemorySave)
		return
	}
	if !s.srv.adm.saves.begin(false) {
		s.w.Error("ERR Background save already in progress")
		return
	}
	if err := s.srv.save(); err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Simple("OK")
}

// cmdBgsave is BGSAVE [SCHEDULE]: the snapshot is taken in the background.
func cmdBgsave(s *session, a [][]byte) {
	if len(a) > 2 || (len(a) == 2 && !ascii.EqualFold(a[1], "schedule")) {
		s.w.Error(msgSyntax)
		return
	}
	if s.srv.cluster == nil {
		s.w.Error(msgInMemorySave)
		return
	}
	if !s.srv.adm.saves.begin(true) {
		s.w.Error("ERR Background save already in progress")
		return
	}
	srv := s.srv
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		srv.save()
	}()
	if s.adm.top != nil && s.adm.top.name == "exec" {
		s.w.Simple("Background saving scheduled") // Redis defers a BGSAVE in EXEC
		return
	}
	s.w.Simple("Background saving started")
}

// cmdShutdown is SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. The server
// stops cleanly (ShutdownRequested; cmd/bfserver exits 0), after a
// snapshot with SAVE. There is never a shutdown waiting for replicas to
// abort: every acknowledged write is already on a majority.
func cmdShutdown(s *session, a [][]byte) {
	var nosave, save, force, abort, now bool
	for _, x := range a[1:] {
		switch ascii.ToLower(x) {
		case "nosave":
			nosave = true
		case "save":
			save = true
		case "now":
			now = true
		case "force":
			force = true
		case "abort":
			abort = true
		default:
			s.w.Error(msgSyntax)
			return
		}
	}
	if (abort && (nosave || save || now || force)) || (nosave && save) {
		s.w.Error(msgSyntax)
		return
	}
	if abort {
		s.w.Error("ERR No shutdown in progress.")
		return
	}
	if save {
		var err error
		switch {
		case s.srv.cluster == nil:
			err = errNothingToSave
		case !s.srv.adm.saves.begin(false):
			err = errSaveRunning
		default:
			err = s.srv.save()
		}
		if err != nil && !force {
			s.srv.opts.Logger.Error("SHUTDOWN SAVE: not shutting down", "err", err)
			s.w.Error("ERR Errors trying to SHUTDOWN. Check logs.")
			return
		}
	}
	s.srv.opts.Logger.Info("SHUTDOWN: stopping", "client", s.adm.raddr)
	s.closing = true
	s.srv.adm.shutdownOnce.Do(func() { close(s.srv.adm.shutdown) })
}

type adminError string

func (e adminError) Error() string { return string(e) }

const (
	errNothingToSave = adminError("this server keeps its filters in memory only (--in-memory)")
	errSaveRunning   = adminError("a save is already in progress")
)

// debugAllowed is enable-debug-command: no, yes, or local (loopback
// clients only).
func (s *session) debugAllowed() bool {
	switch s.srv.opts.EnableDebugCommand {
	case "yes":
		return true
	case "local":
		return s.srv.opts.Local(s.raddr)
	}
	return false
}

const msgDebugNotAllowed = `ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.`

// cmdDebug is DEBUG SLEEP <seconds> and DEBUG RELOAD [MERGE|NOFLUSH|NOSAVE]:
// the two that tools and tests use. RELOAD writes the image and loads the
// keyspace back from it, whatever the options (NOSAVE cannot load an
// older image than the one it writes).
func cmdDebug(s *session, a [][]byte) {
	sub := ascii.ToLower(a[1])
	switch {
	case sub == "sleep" && len(a) == 3:
		d := cDouble(a[2]) * float64(time.Second)
		if !(d > 0) {
			s.w.Simple("OK")
			return
		}
		t := time.NewTimer(time.Duration(min(d, float64(math.MaxInt64))))
		select {
		case <-t.C:
		case <-s.adm.killed:
		case <-s.srv.stop:
		}
		t.Stop()
		s.w.Simple("OK")
	case sub == "reload":
		for _, o := range a[2:] {
			switch ascii.ToLower(o) {
			case "merge", "noflush", "nosave":
			default:
				s.w.Error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")
				return
			}
		}
		if s.srv.cluster != nil {
			ctx, cancel := context.WithCancel(s.srv.ctx)
			defer cancel()
			if err := s.srv.cluster.Reload(ctx); err != nil {
				s.srv.opts.Logger.Error("DEBUG RELOAD", "err", err)
				s.w.Error("ERR Error trying to load the RDB dump, check server logs.")
				return
			}
		}
		s.w.Simple("OK")
	case sub == "help" && len(a) == 2:
		writeHelp(&s.w, debugHelp)
	default:
		subcommandSyntax(s, a)
	}
}

var debugHelp = []string{
	"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"RELOAD [option ...]",
	"    Write the image to disk and load the keyspace back from it. The options",
	"    MERGE, NOFLUSH and NOSAVE are accepted and change nothing.",
	"SLEEP <seconds>",
	"    Stop the connection for <seconds>. Decimals allowed.",
	"HELP",
	"    Print this help.",
}

// cDouble reads the longest prefix of b that C's strtod would read, as
// Redis's DEBUG SLEEP does: "abc" is 0, "0.5s" is 0.5, "0x10" is 16.
func cDouble(b []byte) float64 {
	s := strings.TrimLeft(string(b), " \t\n\v\f\r")
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	sign := s[:i]
	rest := ascii.ToLower(s[i:])
	switch {
	case strings.HasPrefix(rest, "inf"):
		f, _ := strconv.ParseFloat(sign+"inf", 64)
		return f
	case strings.HasPrefix(rest, "nan"):
		return math.NaN()
	case strings.HasPrefix(rest, "0x"):
		var v float64
		scale := 0.0
		j := 2
		for ; j < len(rest); j++ {
			c := rest[j]
			var d int
			switch {
			case c >= '0' && c <= '9':
				d = int(c - '0')
			case c >= 'a' && c <= 'f':
				d = int(c-'a') + 10
			case c == '.' && scale == 0:
				scale = 1
				continue
			default:
				j = len(rest)
				continue
			}
			if scale != 0 {
				scale /= 16
				v += float64(d) * scale
			} else {
				v = v*16 + float64(d)
			}
		}
		if sign == "-" {
			v = -v
		}
		return v
	}
	j := i
	digits := func() int {
		n := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			n++
		}
		return n
	}
	n := digits()
	if j < len(s) && s[j] == '.' {
		j++
		n += digits()
	}
	if n == 0 {
		return 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if digits() == 0 {
			j = k
		}
	}
	f, _ := strconv.ParseFloat(s[:j], 64)
	return f
}
