package replication

import (
	"crypto/tls"
	"net"
)

// TLS holds mutual-TLS settings for traffic between nodes: Raft's and the
// peer protocol's, which share the Raft port. Server must require and
// verify client certificates; Client carries this node's certificate and
// the CA.
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

// listen binds the Raft port, with the cluster's TLS when on.
func listen(bind string, t *TLS) (net.Listener, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if t != nil {
		ln = tls.NewListener(ln, t.Server)
	}
	return ln, nil
}

// localDialer dials from the IP of addr when it names one: on a host with
// several addresses (or nodes on 127.0.0.11–13 in tests) traffic between
// nodes is then attributable to them, so firewalls and partitions work per
// node.
func localDialer(addr string) net.Dialer {
	var d net.Dialer
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return d
}
