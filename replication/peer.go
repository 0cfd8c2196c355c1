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
	"github.com/bfserver/bfserver/internal/wire"
	"github.com/hashicorp/raft"
)

// The peer protocol: what nodes say to each other besides Raft's own
// traffic (forwarded writes, read indexes, leases, commit notices and
// membership requests) travels on the Raft port, on connections of its
// own. One listener serves both: the first byte a dialer sends says which
// (as rqlite's tcp mux does). With cluster TLS the listener itself is TLS
// and demands a certificate from the cluster's CA, so a peer connection
// needs exactly what a Raft connection needs.
//
// A connection carries one request at a time: a frame of its type and
// payload, answered by a frame of an outcome and payload. Outcomes are
// codes (peerErrors), never matched text. A client keeps idle connections
// per peer and checks one is alive before it sends a write over it, so a
// connection the peer closed while idle is not mistaken for a write of
// unknown outcome.

// Connection kinds: the first byte of every connection to the Raft port.
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
// query buffer (1 GiB) plus its encoding. A frame's memory grows with the
// bytes that actually arrive, never with the length it claims.
const maxFrame = 1<<30 + 1<<20

// headerTimeout bounds how long an accepted connection may take to say
// what it is.
const headerTimeout = 10 * time.Second

// mux accepts connections on the Raft address and hands each to Raft or to
// the peer service, by its first byte.
type mux struct {
	ln     net.Listener
	raft   chan net.Conn
	peer   func(net.Conn)
	done   chan struct{}
	once   sync.Once
	log    *slog.Logger
	wg     sync.WaitGroup
	connMu sync.Mutex
	conns  map[net.Conn]bool // peer connections being served
}

func newMux(ln net.Listener, peer func(net.Conn), log *slog.Logger) *mux {
	m := &mux{ln: ln, raft: make(chan net.Conn), peer: peer, done: make(chan struct{}), log: log, conns: map[net.Conn]bool{}}
	m.wg.Add(1)
	go m.accept()
	return m
}

func (m *mux) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Error("raft port: accept", "err", err)
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(c)
		}()
	}
}

func (m *mux) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil {
		c.Close() // a stranger without the cluster's certificate ends here
		return
	}
	c.SetReadDeadline(time.Time{})
	switch kind[0] {
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
		m.peer(c)
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
// addresses), with the cluster's TLS when on, and says what the
// connection is for.
func dialer(bind string, t *TLS) func(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	d := localDialer(bind)
	return func(ctx context.Context, addr string, kind byte) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if t != nil {
			tc := tls.Client(c, t.clientFor(addr))
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, err
			}
			c = tc
		}
		if dl, ok := ctx.Deadline(); ok {
			c.SetWriteDeadline(dl)
		}
		if _, err := c.Write([]byte{kind}); err != nil {
			c.Close()
			return nil, err
		}
		c.SetWriteDeadline(time.Time{})
		return c, nil
	}
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

// readFrame reads one frame; its buffer grows as bytes arrive.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(h[1:]))
	if n > maxFrame {
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

// servePeer answers one peer connection's requests in turn.
func (n *Node) servePeer(c net.Conn) {
	defer c.Close()
	br, bw := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
	for {
		typ, payload, err := readFrame(br)
		if err != nil {
			return
		}
		out, err := n.handlePeer(typ, payload)
		status := respOK
		if err != nil {
			status, out = respErr, encodeErr(err)
		}
		if writeFrame(bw, status, out) != nil {
			return
		}
	}
}

func (n *Node) handlePeer(typ byte, p []byte) ([]byte, error) {
	ctx, cancel := n.stopContext()
	defer cancel()
	r := wire.Reader{B: p}
	switch typ {
	case reqForward:
		idx, results, err := n.Forward(ctx, p)
		if err != nil {
			return nil, err
		}
		return wire.AppendBytes(binary.AppendUvarint(nil, idx), results), nil
	case reqReadIndex:
		ctx, cancel := context.WithTimeout(ctx, n.opts.WriteTimeout)
		defer cancel()
		idx, err := n.ReadIndex(ctx)
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(nil, idx), nil
	case reqLease:
		id := string(r.Bytes())
		if r.Bad {
			return nil, errBadFrame
		}
		d, idx, err := n.Lease(id)
		if err != nil {
			return nil, err
		}
		return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(d.Microseconds())), idx), nil
	case reqCommitted:
		idx := r.Uvarint()
		if r.Bad {
			return nil, errBadFrame
		}
		return nil, n.Committed(idx)
	case reqJoin:
		id, raftAddr, respAddr := string(r.Bytes()), string(r.Bytes()), string(r.Bytes())
		if r.Bad || id == "" || raftAddr == "" {
			return nil, errBadFrame
		}
		ctx, cancel := context.WithTimeout(ctx, n.opts.WriteTimeout)
		defer cancel()
		return nil, n.Join(ctx, id, raftAddr, respAddr)
	case reqRemove:
		id := string(r.Bytes())
		if r.Bad || id == "" {
			return nil, errBadFrame
		}
		ctx, cancel := context.WithTimeout(ctx, n.opts.WriteTimeout)
		defer cancel()
		return nil, n.Remove(ctx, id)
	}
	return nil, errBadFrame
}

// ---- client ----

// peerClient keeps idle connections per peer Raft address.
type peerClient struct {
	dial func(ctx context.Context, addr string, kind byte) (net.Conn, error)

	mu     sync.Mutex
	idle   map[string][]*peerConn
	closed bool
}

type peerConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// maxIdle bounds the idle connections kept per peer.
const maxIdle = 16

// dialTimeout bounds connecting to a peer.
const dialTimeout = 2 * time.Second

func newPeerClient(dial func(ctx context.Context, addr string, kind byte) (net.Conn, error)) *peerClient {
	return &peerClient{dial: dial, idle: map[string][]*peerConn{}}
}

// errDial: the request was never sent.
var errDial = errors.New("peer unreachable")

// get returns a live idle connection or a new one. An idle connection the
// peer closed reads EOF at once; a live one has nothing to read.
func (p *peerClient) get(ctx context.Context, addr string) (*peerConn, error) {
	for {
		p.mu.Lock()
		l := p.idle[addr]
		var pc *peerConn
		if len(l) > 0 {
			pc, p.idle[addr] = l[len(l)-1], l[:len(l)-1]
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
		pc.c.Close() // closed by the peer, or it sent what nobody asked for
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := p.dial(dctx, addr, muxPeer)
	if err != nil {
		return nil, errDial
	}
	return &peerConn{c: c, br: bufio.NewReaderSize(c, 64<<10), bw: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (p *peerClient) put(addr string, pc *peerConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle[addr]) >= maxIdle {
		pc.c.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], pc)
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
		status, out, err = readFrame(pc.br)
	}
	stopped := stop()
	if err != nil {
		pc.c.Close()
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
		pc.c.Close() // its deadline was cut short
	}
	if status != respOK {
		return nil, decodeErr(out)
	}
	return out, nil
}

// drop closes the idle connections to addr.
func (p *peerClient) drop(addr string) {
	p.mu.Lock()
	l := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	for _, pc := range l {
		pc.c.Close()
	}
}

func (p *peerClient) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, l := range p.idle {
		for _, pc := range l {
			pc.c.Close()
		}
	}
	p.idle = nil
}
