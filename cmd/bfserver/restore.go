package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/bfserver/bfserver/replication"
)

// restore is `bfserver restore --from FILE --data-dir DIR [--node-id ID]
// [--addr ADDR] [--raft-addr ADDR]`: it makes DIR the data directory of a
// new node holding what a BFBACKUP file holds, as the only member of a new
// cluster. Start the node with the same --node-id and addresses; other
// nodes join it.
func restore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bfserver restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "a file BFBACKUP wrote")
	dataDir := fs.String("data-dir", "", "the new node's data directory (must not hold a node yet)")
	addr := fs.String("addr", "127.0.0.1:6379", "the RESP address the node will advertise (--advertise-addr, or --addr)")
	raftAddr := fs.String("raft-addr", "", "the Raft address the node will advertise (default: RESP port + 10000)")
	nodeID := fs.String("node-id", "", "the node's id (default: its Raft address)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "bfserver restore:", err)
		return 1
	}
	if *from == "" || *dataDir == "" {
		return fail(fmt.Errorf("--from and --data-dir are required"))
	}
	if *raftAddr == "" {
		var err error
		if *raftAddr, err = defaultRaftAddr(*addr, "--addr"); err != nil {
			return fail(err)
		}
	}
	f, err := os.Open(*from)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if err := replication.RestoreBackup(*dataDir, *nodeID, *raftAddr, *addr, bufio.NewReaderSize(f, 1<<20)); err != nil {
		return fail(fmt.Errorf("%s: %w", *from, err))
	}
	fmt.Fprintf(stdout, "restored %s into %s: start the node there with the same --node-id, --addr and --raft-addr\n", *from, *dataDir)
	return 0
}
