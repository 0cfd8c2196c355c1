package replication

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
)

// TLS holds mutual-TLS settings for traffic between nodes: Raft's and the
// peer protocol's, which share the Raft port. Server must require and
// verify client certificates; Client carries this node's certificate and
// the CA. Both should trust the cluster's own CA, not the one that signs
// the clients' certificates: a certificate from the CA is what lets a
// connection in.
type TLS struct {
	Server, Client *tls.Config
	// AllowedNames, when not empty, are the names a node's certificate
	// may carry: a peer whose certificate (the dialer's, and the
	// acceptor's) has none of them among its DNS names and its subject's
	// common name is refused, whatever CA signed it (etcd's
	// --peer-cert-allowed-cn, Consul's verify_server_hostname).
	AllowedNames []string
}

// errPeerName: a peer's certificate carries none of the allowed names.
var errPeerName = errors.New("the peer's certificate carries none of the names allowed for nodes")

// verify checks a verified peer certificate's names.
func (t *TLS) verify(cs tls.ConnectionState) error {
	if len(t.AllowedNames) == 0 {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return errPeerName
	}
	if names := certNames(cs.PeerCertificates[0]); !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(t.AllowedNames, n) }) {
		return fmt.Errorf("%w (it names %q)", errPeerName, names)
	}
	return nil
}

// certNames are a certificate's DNS names and its common name.
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	return names
}

// clientFor returns the client config for one peer address.
func (t *TLS) clientFor(addr string) *tls.Config {
	c := t.Client.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
	}
	c.VerifyConnection = t.verify
	return c
}

// server returns the listener's config.
func (t *TLS) server() *tls.Config {
	c := t.Server.Clone()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.VerifyConnection = t.verify
	return c
}

// listen binds the Raft port, with the cluster's TLS when on.
func listen(bind string, t *TLS) (net.Listener, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if t != nil {
		ln = tls.NewListener(ln, t.server())
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

// isLoopback reports whether addr's host is a loopback address or
// localhost: only processes on this machine can reach it.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
