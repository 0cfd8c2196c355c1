package replication

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is Raft's TCP stream layer, except that outgoing connections
// leave from this node's own address. On a host with several addresses
// (or nodes on 127.0.0.11–13 in tests) traffic between nodes is then
// attributable to them, so firewalls and partitions work per node.
//
// With TLS set, both ends authenticate: the listener requires a client
// certificate signed by the cluster's CA, and dialing verifies the peer's.
type streamLayer struct {
	ln     net.Listener
	dialer net.Dialer
	tls    *TLS
}

// TLS holds mutual-TLS settings for traffic between nodes (Raft and
// forwarded commands). Server must require and verify client
// certificates; Client carries this node's certificate and the CA.
type TLS struct {
	Server, Client *tls.Config
}

// clientFor returns the client config for one peer address.
func (t *TLS) clientFor(addr string) *tls.Config {
	c := t.Client.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
	}
	return c
}

func newStreamLayer(bind string, t *TLS) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if t != nil {
		ln = tls.NewListener(ln, t.Server)
	}
	return &streamLayer{ln: ln, dialer: localDialer(bind), tls: t}, nil
}

// localDialer dials from the IP of addr when it names one.
func localDialer(addr string) net.Dialer {
	var d net.Dialer
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return d
}

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := s.dialer
	d.Timeout = timeout
	if s.tls == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(&d, "tcp", string(addr), s.tls.clientFor(string(addr)))
}

func (s *streamLayer) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *streamLayer) Close() error              { return s.ln.Close() }
func (s *streamLayer) Addr() net.Addr            { return s.ln.Addr() }

// dialContext is the peers' RESP dialer, from the same local address.
func dialFrom(addr string) func(ctx context.Context, network, target string) (net.Conn, error) {
	d := localDialer(addr)
	d.Timeout = 2 * time.Second
	return func(ctx context.Context, network, target string) (net.Conn, error) {
		return d.DialContext(ctx, network, target)
	}
}
