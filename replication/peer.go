package replication

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ratelog"
	"github.com/bfserver/bfserver/internal/wire"
	"github.com/hashicorp/raft"
)

// The peer protocol: what nodes say to each other besides Raft's own
// traffic (forwarded writes, read indexes, leases, commit notices and
// membership requests) travels on the Raft port, on connections of its
// own. One listener serves both: a connection first authenticates
// (peerauth.go: cluster TLS, the cluster secret's handshake, or both) and
// says which it is (as rqlite's tcp mux does), so a peer connection needs
// exactly what a Raft connection needs, and a stranger gets neither.
//
// A connection carries one request at a time: a frame of its type and
// payload, answered by a frame of an outcome and payload. Outcomes are
// codes (peerErrors), never matched text. A client keeps idle connections
// per peer and checks one is alive before it sends a write over it, so a
// connection the peer closed while idle is not mistaken for a write of
// unknown outcome.
//
// What a peer can make a node hold is bounded before it is allocated:
// connections (MaxPeerConns, and maxPendingPerIP not yet authenticated
// from one address), the time to authenticate (authTimeout) and to stay
// idle (peerIdle), and each request type's frame (frameCap).

// Connection kinds: what a connection is for, said once it authenticated.
const (
	muxRaft byte = 1
	muxPeer byte = 2
)

// Request types.
const (
	reqForward   byte = 1 // an encoded batch → index, encoded results
	reqReadIndex byte = 2 // → index
	reqLease     byte = 3 // node id → lease µs, read index
	reqCommitted byte = 4 // index → ok
	reqJoin      byte = 5 // id, raft address, RESP address → ok
	reqRemove    byte = 6 // id → ok
)

// Response outcomes.
const (
	respOK  byte = 0
	respErr byte = 1 // payload: error code, then its text
)

// maxFrame bounds one message: a forwarded batch is at most a client's
// query buffer (1 GiB) plus its encoding, and so are its results. A
// frame's memory grows with the bytes that actually arrive, never with the
// length it claims.
const maxFrame = 1<<30 + 1<<20

// smallFrame bounds every request but a forward: ids, addresses, indexes.
const smallFrame = 4 << 10

// frameCap is the largest frame of request type typ a node reads.
func frameCap(typ byte) int {
	if typ == reqForward {
		return maxFrame
	}
	return smallFrame
}

const (
	// authTimeout bounds how long an accepted connection may take to
	// authenticate and say what it is.
	authTimeout = 5 * time.Second
	// peerIdle: a peer connection with no request for this long is
	// closed (a client checks an idle connection before it uses it).
	peerIdle = 2 * time.Minute
	// maxPendingPerIP bounds the connections from one address that have
	// not authenticated yet, so that strangers on one host cannot hold
	// every slot while the members' connections wait.
	maxPendingPerIP = 16
	// acceptBackoff is the longest wait between failed accepts (a full
	// descriptor table: EMFILE); it starts at 5ms and doubles.
	acceptBackoff = time.Second
)

// mux accepts connections on the Raft address and hands each, once it
// authenticated, to Raft or to the peer service, by its kind.
type mux struct {
	ln      net.Listener
	auth    *peerAuth
	raft    chan net.Conn
	peer    func(c net.Conn, from string)
	done    chan struct{}
	once    sync.Once
	log     *slog.Logger
	refusal ratelog.Log // connections refused, logged at most once a second
	failed  ratelog.Log // accept errors, likewise
	wg      sync.WaitGroup
	slots   chan struct{} // one per connection open, of MaxPeerConns
	connMu  sync.Mutex
	conns   map[net.Conn]bool // peer connections being served
	pending map[string]int    // per remote IP: connections not yet authenticated
}

func newMux(ln net.Listener, auth *peerAuth, maxConns int, peer func(net.Conn, string), log *slog.Logger) *mux {
	m := &mux{ln: ln, auth: auth, raft: make(chan net.Conn), peer: peer, done: make(chan struct{}), log: log,
		slots: make(chan struct{}, maxConns), conns: map[net.Conn]bool{}, pending: map[string]int{}}
	m.wg.Add(1)
	go m.accept()
	return m
}

// accept serves the listener until it closes. An accept that fails (out
// of descriptors, a connection aborted) is retried after a pause that
// doubles up to acceptBackoff, as net/http's server does: the node keeps
// serving what it has, and takes connections again once it can.
func (m *mux) accept() {
	defer m.wg.Done()
	var pause time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), acceptBackoff)
			m.failed.Warn(m.log, "raft port: accept failed; retrying", "err", err, "retry_in", pause)
			select {
			case <-m.done:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		ip := remoteIP(c)
		if !m.admit(ip) {
			c.Close()
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(&slotConn{Conn: c, release: func() { <-m.slots }}, ip)
		}()
	}
}

// admit takes a slot for a connection from ip, if one is free and ip has
// room for one more connection that has not authenticated.
func (m *mux) admit(ip string) bool {
	select {
	case m.slots <- struct{}{}:
	default:
		m.refusal.Warn(m.log, "raft port: refusing a connection: the node has max peer connections open", "remote", ip, "max", cap(m.slots))
		return false
	}
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if m.pending[ip] >= maxPendingPerIP {
		<-m.slots
		m.refusal.Warn(m.log, "raft port: refusing a connection: too many from one address are authenticating", "remote", ip, "max", maxPendingPerIP)
		return false
	}
	m.pending[ip]++
	return true
}

// authenticated ends ip's pending count for one connection.
func (m *mux) authenticated(ip string) {
	m.connMu.Lock()
	if m.pending[ip]--; m.pending[ip] <= 0 {
		delete(m.pending, ip)
	}
	m.connMu.Unlock()
}

func (m *mux) route(c net.Conn, ip string) {
	c.SetDeadline(time.Now().Add(authTimeout))
	kind, from, err := m.auth.accept(c) // a TLS handshake runs inside its first read
	m.authenticated(ip)
	if err != nil {
		// A stranger without the cluster's certificate or secret ends
		// here, before any request is read.
		if !errors.Is(err, io.EOF) {
			m.refusal.Warn(m.log, "raft port: refusing a connection that did not authenticate", "remote", c.RemoteAddr().String(), "err", err)
		}
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	switch kind {
	case muxRaft:
		select {
		case m.raft <- c:
		case <-m.done:
			c.Close()
		}
	case muxPeer:
		m.connMu.Lock()
		select {
		case <-m.done:
			m.connMu.Unlock()
			c.Close()
			return
		default:
		}
		m.conns[c] = true
		m.connMu.Unlock()
		m.peer(c, from)
		m.connMu.Lock()
		delete(m.conns, c)
		m.connMu.Unlock()
	default:
		c.Close()
	}
}

func (m *mux) close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.connMu.Lock()
		for c := range m.conns {
			c.Close()
		}
		m.connMu.Unlock()
	})
	return err
}

// slotConn gives back its mux slot when it closes.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// rateLog logs a warning at most once a second.
type rateLog = ratelog.Log

// remoteIP is a connection's remote address without its port.
func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host
}

// streamLayer is Raft's side of the mux. Its Addr is what Raft tells
// peers: the advertised address.
type streamLayer struct {
	m         *mux
	dial      func(ctx context.Context, addr string, kind byte) (net.Conn, error)
	advertise string
}

type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raft:
		return c, nil
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error   { return s.m.close() }
func (s *streamLayer) Addr() net.Addr { return advertised(s.advertise) }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(addr), muxRaft)
}

// dialer connects to a peer's Raft port from this node's own address
// (so firewalls and partitions work per node on hosts with several
// addresses), with the cluster's TLS when on, authenticates, and says
// what the connection is for.
func dialer(bind string, t *TLS, auth *peerAuth) func(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	d := localDialer(bind)
	return func(ctx context.Context, addr string, kind byte) (net.Conn, error) {
		c, err := dialAs(ctx, d, t, auth, addr, kind, auth.secret != nil)
		if errors.Is(err, errNoHello) && auth.transition {
			// A node of a build without the handshake, during the rolling
			// restart that gives the cluster its secret.
			c, err = dialAs(ctx, d, t, auth, addr, kind, false)
		}
		return c, err
	}
}

// dialAs dials addr once, with the secret's hello or with the kind byte
// alone.
func dialAs(ctx context.Context, d net.Dialer, t *TLS, auth *peerAuth, addr string, kind byte, hello bool) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(authTimeout))
	}
	if t != nil {
		tc := tls.Client(c, t.clientFor(addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if hello {
		err = auth.dialHello(c, kind)
	} else {
		_, err = c.Write([]byte{kind})
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// ---- frames ----

func writeFrame(w *bufio.Writer, typ byte, payload []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	w.Write(h[:])
	w.Write(payload)
	return w.Flush()
}

// readFrame reads one frame of at most limit(its type) bytes; its buffer
// grows as bytes arrive.
func readFrame(r *bufio.Reader, limit func(typ byte) int) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(h[1:]))
	if n > limit(h[0]) {
		return 0, nil, errBadFrame
	}
	buf := make([]byte, 0, min(n, 1<<20))
	for len(buf) < n {
		step := min(n-len(buf), 1<<20)
		if cap(buf)-len(buf) < step {
			nb := make([]byte, len(buf), min(n, 2*cap(buf)+step))
			copy(nb, buf)
			buf = nb
		}
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+step]); err != nil {
			return 0, nil, err
		}
		buf = buf[:len(buf)+step]
	}
	return h[0], buf, nil
}

// encodeErr writes an error as its code and text.
func encodeErr(err error) []byte {
	var code uint64 = codeRemote
	var inv *command.InvalidError
	var st *command.StorageError
	text := err.Error()
	switch {
	case errors.As(err, &inv):
		code, text = codeInvalid, string([]byte{byte(inv.Op)})+inv.Reason
	case errors.As(err, &st):
		code, text = codeStorage, st.Cause
	default:
		for i, e := range peerErrors {
			if e != nil && errors.Is(err, e) {
				code = uint64(i)
				break
			}
		}
	}
	b := binary.AppendUvarint(nil, code)
	return wire.AppendBytes(b, []byte(text))
}

func decodeErr(b []byte) error {
	r := wire.Reader{B: b}
	code := r.Uvarint()
	text := string(r.Bytes())
	switch {
	case r.Bad:
		return errBadFrame
	case code == codeInvalid && len(text) > 0:
		return &command.InvalidError{Op: command.Op(text[0]), Reason: text[1:]}
	case code == codeStorage:
		return &command.StorageError{Cause: text}
	case code > 0 && code < uint64(len(peerErrors)):
		return peerErrors[code]
	}
	return &RemoteError{Msg: text}
}

// ---- server ----

// anyFrame is readFrame's limit for answers: as large as a request may be.
func anyFrame(byte) int { return maxFrame }

// servePeer answers one peer connection's requests in turn. from is the
// node id the peer gave when it authenticated ("" without the secret's
// handshake).
func (n *Node) servePeer(c net.Conn, from string) {
	defer c.Close()
	br, bw := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(peerIdle))
		typ, payload, err := readFrame(br, frameCap)
		if err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		out, err := n.handlePeer(typ, payload, from)
		status := respOK
		if err != nil {
			status, out = respErr, encodeErr(err)
		}
		if writeFrame(bw, status, out) != nil {
			return
		}
	}
}

// peerRequest is a request as decoded from its frame.
type peerRequest struct {
	typ   byte
	batch []byte // forward: the encoded batch, decoded and validated by Forward
	index uint64 // committed
	// id: lease, join and remove; the addresses: join.
	id, raftAddr, respAddr string
}

// decodeRequest reads a request's payload; anything else in it is an
// error.
func decodeRequest(typ byte, p []byte) (peerRequest, error) {
	q := peerRequest{typ: typ}
	r := wire.Reader{B: p}
	switch typ {
	case reqForward:
		q.batch, r.B = p, nil
	case reqReadIndex:
	case reqLease:
		q.id = string(r.Bytes())
	case reqCommitted:
		q.index = r.Uvarint()
	case reqJoin:
		q.id, q.raftAddr, q.respAddr = string(r.Bytes()), string(r.Bytes()), string(r.Bytes())
		r.Bad = r.Bad || q.raftAddr == ""
	case reqRemove:
		q.id = string(r.Bytes())
	default:
		return q, errBadFrame
	}
	if r.Bad || len(r.B) != 0 || (typ == reqJoin || typ == reqRemove) && q.id == "" {
		return q, errBadFrame
	}
	return q, nil
}

// handlePeer serves one request from peer from.
func (n *Node) handlePeer(typ byte, p []byte, from string) ([]byte, error) {
	q, err := decodeRequest(typ, p)
	if err != nil {
		return nil, err
	}
	// The port listens while the log replays, before Raft runs.
	if !n.raftUp.Load() {
		return nil, command.ErrNoLeader
	}
	ctx, cancel := n.stopContext()
	defer cancel()
	switch q.typ {
	case reqForward:
		idx, results, err := n.Forward(ctx, q.batch)
		if err != nil {
			return nil, err
		}
		return wire.AppendBytes(binary.AppendUvarint(nil, idx), results), nil
	case reqLease:
		d, idx, err := n.Lease(q.id)
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(d.Microseconds())), idx), nil
	case reqCommitted:
		return nil, n.committedFrom(from, q.index)
	}
	ctx, cancel = context.WithTimeout(ctx, n.opts.WriteTimeout)
	defer cancel()
	switch q.typ {
	case reqReadIndex:
		idx, err := n.ReadIndex(ctx)
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(nil, idx), nil
	case reqJoin:
		return nil, n.Join(ctx, q.id, q.raftAddr, q.respAddr)
	default: // reqRemove
		return nil, n.Remove(ctx, q.id)
	}
}

// ---- client ----

// peerClient keeps connections per peer Raft address: at most
// maxPeerOpen open to each (idle or in use), of which at most maxIdle
// idle. A caller that finds every one in use waits for one, so that a
// burst of writes on a follower cannot open more connections to the
// leader than the leader takes (MaxPeerConns).
type peerClient struct {
	dial func(ctx context.Context, addr string, kind byte) (net.Conn, error)

	mu     sync.Mutex
	peers  map[string]*peerConns
	closed bool
}

// peerConns are one peer's connections.
type peerConns struct {
	idle  []*peerConn
	open  int           // idle ones included
	freed chan struct{} // closed and replaced when one is put back or closed
}

type peerConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

const (
	// maxIdle bounds the idle connections kept per peer.
	maxIdle = 16
	// maxPeerOpen bounds the connections open to one peer.
	maxPeerOpen = 48
	// dialTimeout bounds connecting to a peer and authenticating.
	dialTimeout = 2 * time.Second
)

func newPeerClient(dial func(ctx context.Context, addr string, kind byte) (net.Conn, error)) *peerClient {
	return &peerClient{dial: dial, peers: map[string]*peerConns{}}
}

// errDial: the request was never sent.
var errDial = errors.New("peer unreachable")

// of is addr's connections; p.mu is held.
func (p *peerClient) of(addr string) *peerConns {
	pc := p.peers[addr]
	if pc == nil {
		pc = &peerConns{freed: make(chan struct{})}
		p.peers[addr] = pc
	}
	return pc
}

// gone records that one of addr's connections closed; p.mu is held.
func (pcs *peerConns) gone(n int) {
	pcs.open -= n
	close(pcs.freed)
	pcs.freed = make(chan struct{})
}

// get returns a live idle connection or a new one, waiting while addr has
// maxPeerOpen in use. An idle connection the peer closed reads EOF at
// once; a live one has nothing to read.
func (p *peerClient) get(ctx context.Context, addr string) (*peerConn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errDial
		}
		pcs := p.of(addr)
		var pc *peerConn
		if l := pcs.idle; len(l) > 0 {
			pc, pcs.idle = l[len(l)-1], l[:len(l)-1]
		} else if pcs.open >= maxPeerOpen {
			freed := pcs.freed
			p.mu.Unlock()
			select {
			case <-freed:
				continue
			case <-ctx.Done():
				return nil, errDial
			}
		} else {
			pcs.open++
		}
		p.mu.Unlock()
		if pc == nil {
			break
		}
		pc.c.SetReadDeadline(time.Now())
		_, err := pc.br.Peek(1)
		pc.c.SetReadDeadline(time.Time{})
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return pc, nil
		}
		p.discard(addr, pc) // closed by the peer, or it sent what nobody asked for
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := p.dial(dctx, addr, muxPeer)
	if err != nil {
		p.mu.Lock()
		p.of(addr).gone(1)
		p.mu.Unlock()
		return nil, errDial
	}
	return &peerConn{c: c, br: bufio.NewReaderSize(c, 64<<10), bw: bufio.NewWriterSize(c, 64<<10)}, nil
}

// put gives back a connection that answered.
func (p *peerClient) put(addr string, pc *peerConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pcs := p.of(addr)
	if p.closed || len(pcs.idle) >= maxIdle {
		pc.c.Close()
		pcs.gone(1)
		return
	}
	pcs.idle = append(pcs.idle, pc)
	close(pcs.freed)
	pcs.freed = make(chan struct{})
}

// discard closes a connection taken from addr.
func (p *peerClient) discard(addr string, pc *peerConn) {
	pc.c.Close()
	p.mu.Lock()
	p.of(addr).gone(1)
	p.mu.Unlock()
}

// call sends one request and waits for its answer until ctx ends. It
// returns errDial if the request was never sent, and ErrConnLost if the
// connection broke (or ctx ended) after it may have been.
func (p *peerClient) call(ctx context.Context, addr string, typ byte, payload []byte) ([]byte, error) {
	pc, err := p.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { pc.c.SetDeadline(time.Unix(1, 0)) })
	err = writeFrame(pc.bw, typ, payload)
	var status byte
	var out []byte
	if err == nil {
		status, out, err = readFrame(pc.br, anyFrame)
	}
	stopped := stop()
	if err != nil {
		p.discard(addr, pc)
		// The peer's other idle connections are likely as dead as this one
		// (a partition drops packets without closing anything): dial
		// afresh next time instead of finding out one timeout at a time.
		p.drop(addr)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, command.ErrConnLost
	}
	if stopped {
		p.put(addr, pc)
	} else {
		p.discard(addr, pc) // its deadline was cut short
	}
	if status != respOK {
		return nil, decodeErr(out)
	}
	return out, nil
}

// drop closes the idle connections to addr.
func (p *peerClient) drop(addr string) {
	p.mu.Lock()
	pcs := p.of(addr)
	l := pcs.idle
	pcs.idle = nil
	if len(l) > 0 {
		pcs.gone(len(l))
	}
	p.mu.Unlock()
	for _, pc := range l {
		pc.c.Close()
	}
}

func (p *peerClient) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pcs := range p.peers {
		for _, pc := range pcs.idle {
			pc.c.Close()
		}
		pcs.idle = nil
	}
}
