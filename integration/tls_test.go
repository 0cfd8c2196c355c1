package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// pki is a throwaway CA and one certificate it signed for 127.0.0.0/8 use,
// named after the CA.
type pki struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	cert                      tls.Certificate
	name                      string
	dir                       string
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := &pki{caFile: filepath.Join(dir, "ca.pem"), name: name, dir: dir, ca: caCert, caKey: caKey}
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	p.certFile, p.keyFile, p.cert = p.issue(t, name)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)
	return p
}

// issue makes another certificate of the CA's, named cn, for the same
// addresses: its files and the pair.
func (p *pki) issue(t *testing.T, cn string) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 11), net.IPv4(127, 0, 0, 12), net.IPv4(127, 0, 0, 13)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(p.dir, cn+"-cert.pem"), filepath.Join(p.dir, cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	pair, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

func (p *pki) flags(extra ...string) []string {
	return append([]string{"--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-ca-cert-file", p.caFile}, extra...)
}

func (p *pki) client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 3, MaxRetries: -1,
		TLSConfig: &tls.Config{ServerName: "127.0.0.1", RootCAs: p.pool, Certificates: []tls.Certificate{p.cert}, MinVersion: tls.VersionTLS12}})
}

// TestTLSClients: go-redis over TLS works, plain TCP is refused, TLS 1.1
// is refused, and redis-cli --tls works where it is built with TLS.
func TestTLSClients(t *testing.T) {
	p := newPKI(t, "bfserver")
	n := start(t, p.flags("--tls-auth-clients", "no")...)
	c := p.client(n.addr)
	defer c.Close()
	if err := c.Do(ctx(t), "BF.ADD", "k", "x").Err(); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	if v, err := c.Do(ctx(t), "BF.EXISTS", "k", "x").Bool(); err != nil || !v {
		t.Fatalf("TLS BF.EXISTS = %v, %v", v, err)
	}
	if err := n.client(2).Ping(ctx(t)).Err(); err == nil {
		t.Fatal("plain TCP client served on a TLS port")
	}
	old := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", n.addr, old); err == nil {
		conn.Close()
		t.Fatal("TLS 1.1 accepted")
	}
	cli := needTool(t, "redis-cli", "redis-tools")
	host, port, _ := net.SplitHostPort(n.addr)
	out, err := exec.Command(cli, "--tls", "--cacert", p.caFile, "-h", host, "-p", port, "BF.EXISTS", "k", "x").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		if strings.Contains(string(out), "not supported") || strings.Contains(string(out), "Unrecognized option") {
			t.Logf("redis-cli lacks TLS support: %s", out)
			return
		}
		t.Fatalf("redis-cli --tls: %v %s", err, out)
	}
}

// TestTLSClusterRejectsStrangers: three nodes talk mutual TLS on their
// Raft port, Raft and the nodes' own protocol alike: a write forwarded by
// a follower and a follower's read-index request cross it; a node with a
// certificate from another CA can neither join nor speak the protocol
// (nor can a plain TCP client), and the cluster keeps three members and
// serves writes through any of them.
func TestTLSClusterRejectsStrangers(t *testing.T) {
	p := newPKI(t, "cluster")
	// Without follower leases, a follower's linearizable read asks the
	// leader for a read index.
	nodes := startClusterTLS(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, p, p.flags("--tls-cluster", "--tls-cluster-allowed-names", p.name, "--follower-read-lease=false")...)
	leader := leaderOf(t, nodes)
	for _, n := range nodes {
		c := p.client(n.addr)
		if err := c.Do(ctx(t), "BF.ADD", "k", n.addr).Err(); err != nil {
			t.Fatalf("write through %s: %v", n.addr, err)
		}
		c.Close()
	}
	for _, f := range without(nodes, leader) {
		c := p.client(f.addr)
		for _, n := range nodes {
			if v, err := c.Do(ctx(t), "BF.EXISTS", "k", n.addr).Bool(); err != nil || !v {
				t.Fatalf("read on follower %s of the write through %s: %v %v", f.addr, n.addr, v, err)
			}
		}
		c.Close()
		if n, _ := strconv.Atoi(tlsReplInfo(t, p, f)["read_index_requests"]); n == 0 {
			t.Fatalf("follower %s read without asking the leader for a read index", f.addr)
		}
	}
	stranger := newPKI(t, "stranger")
	// A peer request from a stranger's certificate, and from plain TCP, to
	// the leader's Raft port: the connection ends without an answer.
	frame := []byte{2, 2, 0, 0, 0, 0} // a peer connection, then a read-index request
	for name, dial := range map[string]func() (net.Conn, error){
		"another CA": func() (net.Conn, error) {
			return tls.Dial("tcp", leader.raftAddr, &tls.Config{ServerName: "127.0.0.1", RootCAs: p.pool,
				Certificates: []tls.Certificate{stranger.cert}, MinVersion: tls.VersionTLS12})
		},
		"plain TCP": func() (net.Conn, error) { return net.Dial("tcp", leader.raftAddr) },
	} {
		conn, err := dial()
		if err != nil {
			continue // refused at the handshake already
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write(frame)
		if n, err := conn.Read(make([]byte, 64)); err == nil {
			t.Fatalf("%s: the Raft port answered a peer request (%d bytes)", name, n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s: the Raft port kept the connection open", name)
		}
		conn.Close()
	}
	s := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(),
		args: stranger.flags("--tls-cluster", "--tls-cluster-allowed-names", p.name, "--node-id", "stranger", "--join", nodes[0].addr)}
	s.launch()
	c := p.client(nodes[0].addr)
	defer c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		m, err := c.Do(ctx(t), "BFCLUSTER", "MEMBERS").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 3 {
			t.Fatalf("cluster has %d members after a stranger tried to join", len(m))
		}
		time.Sleep(200 * time.Millisecond) // watching the membership for a while
	}
}

// tlsReplInfo is replInfo over the cluster's TLS.
func tlsReplInfo(t *testing.T, p *pki, n *node) map[string]string {
	c := p.client(n.addr)
	defer c.Close()
	s, err := c.Info(ctx(t), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}
