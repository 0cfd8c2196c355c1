package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bfserver/bfserver/server"
)

// settings is the one place flags are read. Every setting is a flag, a
// line of the --config file and a BFSERVER_* environment variable, in
// rising precedence: defaults, the file, the environment, the command
// line. Each value is checked when it is set, with the same ranges the
// server uses at run time (CONFIG SET, command.Validate), and the source
// of every value is kept, so an error names where the bad value came
// from: a flag, a variable, or a file and line.
type settings struct {
	fs      *flag.FlagSet
	source  map[string]string // setting name → where its value came from
	current string            // the source of the values being set now; "" is the command line
}

func newSettings() *settings {
	fs := flag.NewFlagSet("bfserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned with their source; -h prints usage itself
	return &settings{fs: fs, source: map[string]string{}}
}

// tracked records where each value of a setting came from.
type tracked struct {
	flag.Value
	name string
	s    *settings
}

func (t *tracked) Set(v string) error {
	src := t.s.current
	if src == "" {
		src = "flag --" + t.name
	}
	if err := t.Value.Set(v); err != nil {
		return err
	}
	t.s.source[t.name] = src
	return nil
}

// String is the value's; the flag package also calls it on a zero
// tracked, to tell a default from the zero value in --help.
func (t *tracked) String() string {
	if t == nil || t.Value == nil {
		return ""
	}
	return t.Value.String()
}

func (t *tracked) IsBoolFlag() bool {
	b, ok := t.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// parse reads the config file, the environment and args, in that order.
func (s *settings) parse(args []string) error {
	s.fs.VisitAll(func(f *flag.Flag) { f.Value = &tracked{Value: f.Value, name: f.Name, s: s} })
	if path := configPath(args); path != "" {
		if err := s.loadFile(path); err != nil {
			return err
		}
	}
	var err error
	s.fs.VisitAll(func(f *flag.Flag) {
		env := "BFSERVER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && err == nil {
			s.current = "environment variable " + env
			if serr := s.fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s: invalid value %q for %s: %w", s.current, v, f.Name, serr)
			}
		}
	})
	s.current = ""
	if err != nil {
		return err
	}
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("command line: %w", err)
	}
	if s.fs.NArg() > 0 {
		return fmt.Errorf("command line: unexpected argument %q", s.fs.Arg(0))
	}
	return nil
}

// usage prints every setting with its default.
func (s *settings) usage(w io.Writer) {
	fmt.Fprint(w, "Usage: bfserver [flags]\n\nEvery flag is also a --config file line (name value) and a BFSERVER_* environment variable.\n\n")
	s.fs.SetOutput(w)
	s.fs.PrintDefaults()
	s.fs.SetOutput(io.Discard)
}

// loadFile applies "name value" lines; # starts a comment, and a value may
// be double-quoted. Names are the flag names.
func (s *settings) loadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, _ := strings.Cut(line, " ")
		val = strings.TrimSpace(val)
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		}
		where := fmt.Sprintf("%s:%d", path, i+1)
		if name == "config" || s.fs.Lookup(name) == nil {
			return fmt.Errorf("%s: unknown setting %q", where, name)
		}
		s.current = where
		err := s.fs.Set(name, val)
		s.current = ""
		if err != nil {
			return fmt.Errorf("%s: invalid value %q for %s: %w", where, val, name, err)
		}
	}
	return nil
}

// configPath finds --config on the command line before the flags are
// parsed, since the file must apply first.
func configPath(args []string) string {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "config" || !strings.HasPrefix(a, "-") {
			continue
		}
		if hasVal {
			return val
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

var settingName = regexp.MustCompile(`[a-z][a-z0-9]*(-[a-z0-9]+)+|maxclients|maxmemory|requirepass|fsync`)

// blame adds to a validation error the sources of the settings it names.
func (s *settings) blame(err error) error {
	var where []string
	seen := map[string]bool{}
	for _, name := range settingName.FindAllString(err.Error(), -1) {
		if src := s.source[name]; src != "" && !seen[name] {
			seen[name] = true
			where = append(where, name+" from "+src)
		}
	}
	if len(where) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(where, ", "))
}

// Typed values: each checks its range when set.

// moduleValue is one bf-*/cf-* setting, checked by RedisBloom's ranges.
type moduleValue struct {
	m    *server.ModuleConfig
	name string
}

func (v moduleValue) String() string {
	if v.m == nil {
		return ""
	}
	return v.m.Get(v.name)
}
func (v moduleValue) Set(s string) error { return v.m.Set(v.name, s) }

// memoryValue is a byte size with Redis's units (100mb, 1gb).
type memoryValue struct{ p *uint64 }

func (v memoryValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p, 10)
}

func (v memoryValue) Set(s string) error {
	n, err := server.ParseMemory(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// rangeValue is an integer in [lo, hi].
type rangeValue struct {
	p      *int64
	lo, hi int64
}

func (v rangeValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v rangeValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < v.lo || n > v.hi {
		return fmt.Errorf("must be in the range [%d, %d]", v.lo, v.hi)
	}
	*v.p = n
	return nil
}

// durationValue is a positive duration.
type durationValue struct{ p *time.Duration }

func (v durationValue) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (e.g. 30s, 500ms)")
	}
	if d <= 0 {
		return errors.New("must be positive")
	}
	*v.p = d
	return nil
}

// choiceValue is one of a few words.
type choiceValue struct {
	p       *string
	choices []string
}

func (v choiceValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v choiceValue) Set(s string) error {
	for _, c := range v.choices {
		if s == c {
			*v.p = s
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(v.choices, ", "))
}
