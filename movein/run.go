package movein

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Run runs the subcommand name ("migrate" or "load") with os.Args-style
// arguments after it and returns the exit code; SIGINT and SIGTERM cancel
// it (a key being copied or loaded is left as it was).
func Run(name string, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch name {
	case "migrate":
		return Migrate(ctx, args, os.Stdout, os.Stderr)
	case "load":
		return Load(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	}
	fmt.Fprintf(os.Stderr, "bfserver: unknown subcommand %q\n", name)
	return 2
}
