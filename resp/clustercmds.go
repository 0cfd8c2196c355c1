package resp

import (
	"context"
	"strconv"
)

// Commands between nodes, and the operators' membership commands. They
// exist only when the backend replicates.
func init() {
	admin := []string{"@admin", "@slow", "@dangerous"}
	conn("bfraft.forward", 2, []string{"write"}, admin, cmdForward)
	conn("bfraft.readindex", 1, []string{"readonly", "fast"}, admin, cmdReadIndex)
	conn("bfraft.lease", 2, []string{"readonly", "fast"}, admin, cmdLease)
	conn("bfraft.committed", 2, []string{"readonly", "fast"}, admin, cmdCommitted)
	conn("bfcluster", -2, nil, admin, nil).subs = map[string]*spec{
		"join":    {name: "join", arity: 5, run: cmdClusterJoin},
		"remove":  {name: "remove", arity: 3, run: cmdClusterRemove},
		"members": {name: "members", arity: 2, run: cmdClusterMembers},
	}
}

func (s *session) clusterCtx() (Cluster, context.Context, context.CancelFunc, bool) {
	c, ok := s.cluster()
	if !ok {
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.srv.opts.WriteTimeout)
	return c, ctx, cancel, true
}

// cluster is the replication backend, or false after answering that there
// is none.
func (s *session) cluster() (Cluster, bool) {
	if s.srv.cluster == nil {
		s.w.Error("ERR this server does not replicate")
		return nil, false
	}
	return s.srv.cluster, true
}

func cmdForward(s *session, a [][]byte) {
	c, ctx, cancel, ok := s.clusterCtx()
	if !ok {
		return
	}
	defer cancel()
	idx, results, err := c.Forward(ctx, a[1])
	if err != nil {
		s.lostBuf = true // the decoded commands alias a[1], which may still be logged
		s.w.Error(wireError(err))
		return
	}
	s.w.Array(2)
	s.w.Int(int64(idx))
	s.w.Bulk(results)
}

func cmdReadIndex(s *session, a [][]byte) {
	c, ctx, cancel, ok := s.clusterCtx()
	if !ok {
		return
	}
	defer cancel()
	idx, err := c.ReadIndex(ctx)
	if err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Int(int64(idx))
}

// BFRAFT.LEASE <node-id>
func cmdLease(s *session, a [][]byte) {
	c, ctx, cancel, ok := s.clusterCtx()
	if !ok {
		return
	}
	defer cancel()
	d, idx, err := c.Lease(ctx, string(a[1]))
	if err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Array(2)
	s.w.Int(d.Microseconds())
	s.w.Int(int64(idx))
}

// BFRAFT.COMMITTED <index>
func cmdCommitted(s *session, a [][]byte) {
	c, ok := s.cluster()
	if !ok {
		return
	}
	idx, err := strconv.ParseUint(string(a[1]), 10, 64)
	if err != nil {
		s.w.Error(msgNotInteger)
		return
	}
	if err := c.Committed(idx); err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Simple("OK")
}

// BFCLUSTER JOIN <node-id> <raft-addr> <resp-addr>
func cmdClusterJoin(s *session, a [][]byte) {
	c, ctx, cancel, ok := s.clusterCtx()
	if !ok {
		return
	}
	defer cancel()
	if err := c.Join(ctx, string(a[2]), string(a[3]), string(a[4])); err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Simple("OK")
}

// BFCLUSTER REMOVE <node-id>
func cmdClusterRemove(s *session, a [][]byte) {
	c, ctx, cancel, ok := s.clusterCtx()
	if !ok {
		return
	}
	defer cancel()
	if err := c.Remove(ctx, string(a[2])); err != nil {
		s.w.Error(wireError(err))
		return
	}
	s.w.Simple("OK")
}

// BFCLUSTER MEMBERS: one [id, raft address, RESP address] per voter.
func cmdClusterMembers(s *session, a [][]byte) {
	c, _, cancel, ok := s.clusterCtx()
	if !ok {
		return
	}
	defer cancel()
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
