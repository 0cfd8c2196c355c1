package integration

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRedisCLIHints drives an interactive redis-cli in a tmux pane: the
// argument hint it shows while a command is typed, and its help text, both
// come from the server's COMMAND DOCS and must read as with RedisBloom.
func TestRedisCLIHints(t *testing.T) {
	cli := needTool(t, "redis-cli", "redis-tools")
	tmux := needTool(t, "tmux", "tmux")
	n := start(t)
	host, port, _ := net.SplitHostPort(n.addr)

	// A private tmux server: its socket lives in the test's directory and
	// kill-server ends it (and the redis-cli in it) when the test is done.
	sock := filepath.Join(t.TempDir(), "tmux")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-s", "cli", "-x", "220", "-y", "50",
		"env REDISCLI_HISTFILE=/dev/null REDISCLI_RCFILE=/dev/null "+cli+" -h "+host+" -p "+port)
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })

	// waitPane polls the pane until every want line shows, for at most 15 s.
	waitPane := func(step string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			pane := tm("capture-pane", "-p", "-t", "cli")
			missing := ""
			for _, w := range want {
				if !strings.Contains(pane, w) {
					missing = w
					break
				}
			}
			if missing == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q not shown; pane:\n%s", step, missing, pane)
			}
			time.Sleep(20 * time.Millisecond) // polling the pane
		}
	}
	prompt := host + ":" + port + "> "
	waitPane("prompt", strings.TrimSpace(prompt)) // capture-pane drops trailing blanks

	tm("send-keys", "-t", "cli", "-l", "BF.INSERT k ")
	waitPane("BF.INSERT hint",
		prompt+"BF.INSERT k [CAPACITY capacity] [ERROR error] [EXPANSION expansion] [NOCREATE] [NONSCALING] ITEMS item [item ...]")

	tm("send-keys", "-t", "cli", "C-u")
	tm("send-keys", "-t", "cli", "-l", "CF.INSERTNX c ")
	waitPane("CF.INSERTNX hint", prompt+"CF.INSERTNX c [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]")

	tm("send-keys", "-t", "cli", "C-u")
	tm("send-keys", "-t", "cli", "-l", "help BF.ADD")
	tm("send-keys", "-t", "cli", "Enter")
	waitPane("help BF.ADD",
		"  BF.ADD key item\n",
		"  summary: Adds an item to a Bloom Filter\n",
		"  since: 1.0.0\n",
		"  group: module\n")

	tm("send-keys", "-t", "cli", "-l", "help CONFIG SET")
	tm("send-keys", "-t", "cli", "Enter")
	waitPane("help CONFIG SET",
		"  CONFIG SET parameter value [parameter value ...]\n",
		"  summary: Sets configuration parameters in-flight.\n",
		"  group: server\n")
}
