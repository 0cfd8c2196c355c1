package server

import (
	"context"
	"time"
)

// The operators' membership commands. They exist only when the backend
// replicates; nodes speak to each other on their own port.
func registerCluster() {
	admin := []string{"@admin", "@slow", "@dangerous"}
	conn("bfbackup", 2, []string{"admin", "noscript"}, admin, cmdBackup)
	conn("bfcluster", -2, nil, admin, nil).subs = map[string]*spec{
		"join":    {name: "join", arity: 5, run: cmdClusterJoin},
		"remove":  {name: "remove", arity: 3, run: cmdClusterRemove},
		"members": {name: "members", arity: 2, run: cmdClusterMembers},
	}
}

// membershipTimeout bounds a membership change: Raft's own timeout for
// adding or removing a voter is 10s.
const membershipTimeout = 15 * time.Second

// cluster is the replication backend, or false after answering that there
// is none.
func (s *session) cluster() (Cluster, bool) {
	if s.srv.cluster == nil {
		s.w.Error("ERR this server does not replicate")
		return nil, false
	}
	return s.srv.cluster, true
}

// BFBACKUP <path>: a consistent copy of this node's state in a file on
// the node, for bfserver restore; the backend decides where it may write
// (replication: only inside --backup-dir). The reply is the log index it is at.
func cmdBackup(s *session, a [][]byte) {
	c, ok := s.cluster()
	if !ok {
		return
	}
	idx, err := c.Backup(s.srv.ctx, string(a[1]))
	if err != nil {
		s.w.Error("ERR backup failed: " + sanitize(err.Error(), 512))
		return
	}
	s.w.Int(int64(idx))
}

// BFCLUSTER JOIN <node-id> <raft-addr> <resp-addr>
func cmdClusterJoin(s *session, a [][]byte) {
	c, ok := s.cluster()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, membershipTimeout)
	defer cancel()
	if err := c.Join(ctx, string(a[2]), string(a[3]), string(a[4])); err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Simple("OK")
}

// BFCLUSTER REMOVE <node-id>
func cmdClusterRemove(s *session, a [][]byte) {
	c, ok := s.cluster()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, membershipTimeout)
	defer cancel()
	if err := c.Remove(ctx, string(a[2])); err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Simple("OK")
}

// BFCLUSTER MEMBERS: one [id, raft address, RESP address] per voter.
func cmdClusterMembers(s *session, a [][]byte) {
	c, ok := s.cluster()
	if !ok {
		return
	}
	m, err := c.Members()
	if err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Array(len(m))
	for _, x := range m {
		s.w.Array(3)
		for _, v := range x {
			s.w.BulkString(v)
		}
	}
}
