package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/bfserver/bfserver/movein"
)

// Set with -ldflags "-X main.version=… -X main.commit=… -X main.buildDate=…"
// (the Makefile and the Dockerfile do). The version and commit are taken
// from the binary's build information first: go build stamps them from the
// module and Git when it builds in a checkout. A build without .git (a
// container context, a Git worktree, -buildvcs=false) has neither, so the
// linker flags fill in. Go records no build date: only -X gives one.
var (
	version   string
	commit    string
	buildDate string
)

// versionInfo is what --version prints.
type versionInfo struct {
	Version, Commit, CommitTime, BuildDate, GoVersion, Platform string
	Modified                                                    bool
}

func readVersion() versionInfo {
	v := versionInfo{
		Version: version, Commit: commit, BuildDate: buildDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			v.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	for _, f := range []*string{&v.Version, &v.Commit, &v.CommitTime, &v.BuildDate} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return v
}

func printVersion(w io.Writer) {
	v := readVersion()
	mod := ""
	if v.Modified {
		mod = " (modified)"
	}
	fmt.Fprintf(w, "bfserver %s\ncommit %s%s\ncommit time %s\nbuilt %s\n%s %s\n",
		v.Version, v.Commit, mod, v.CommitTime, v.BuildDate, v.GoVersion, v.Platform)
}

// subcommand handles the invocations that are not a server: --version
// (or -version, version) and healthcheck. It reports whether it handled
// args, and the exit code.
func subcommand(args []string, stdout, stderr io.Writer) (code int, handled bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "--version", "-version", "version":
		printVersion(stdout)
		return 0, true
	case "healthcheck":
		return healthcheck(args[1:], stderr), true
	case "migrate", "load":
		return movein.Run(args[0], args[1:]), true
	case "restore":
		return restore(args[1:], stdout, stderr), true
	}
	return 0, false
}
