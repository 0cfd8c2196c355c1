package integration

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	bin "encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"
)

// The Raft port as a stranger sees it: these tests speak the nodes' own
// protocol (replication/peer.go, peerauth.go) from outside, byte by byte,
// and Raft's through hashicorp/raft's own transport.

// Peer protocol pieces: connection kinds, request types, the hello.
const (
	kindRaft     = 1
	kindPeer     = 2
	reqForward   = 1
	reqReadIndex = 2
	reqJoin      = 5
	reqRemove    = 6
)

// peerFrame frames one peer request.
func peerFrame(typ byte, payload []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	bin.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func wireBytes(vs ...string) []byte {
	var b []byte
	for _, v := range vs {
		b = bin.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// peerRequests are what a stranger asked of the Raft port: make an admin
// user, join a rogue voter, remove a member.
func peerRequests(user, removed string) map[string][]byte {
	pw := sha256.Sum256([]byte("pw"))
	setuser := command.EncodeBatch([]*command.Cmd{{Op: command.ACLSetUser, Key: []byte(user), NX: true,
		Items: [][]byte{[]byte("on"), []byte("#" + hex.EncodeToString(pw[:])), []byte("~*"), []byte("&*"), []byte("+@all")}}})
	return map[string][]byte{
		"forward ACL SETUSER": peerFrame(reqForward, setuser),
		"join":                peerFrame(reqJoin, wireBytes("rogue", "127.0.0.1:1", "127.0.0.1:2")),
		"remove":              peerFrame(reqRemove, wireBytes(removed)),
		"read index":          peerFrame(reqReadIndex, nil),
	}
}

// hello runs the dialer's side of the secret's handshake on c, proving
// secret: whether the node accepted it, and whether its own proof is
// right.
func hello(c net.Conn, kind byte, id string, secret []byte) (accepted bool, err error) {
	raw := append([]byte{'B', 'F', 'P', 1, kind, byte(len(id))}, id...)
	nonce := make([]byte, 32)
	rand.Read(nonce)
	raw = append(raw, nonce...)
	if _, err := c.Write(raw); err != nil {
		return false, err
	}
	theirs := make([]byte, 32)
	if _, err := io.ReadFull(c, theirs); err != nil {
		return false, err
	}
	proof := func(label string) []byte {
		h := hmac.New(sha256.New, secret)
		h.Write([]byte(label))
		h.Write(raw)
		h.Write(theirs)
		return h.Sum(nil)
	}
	if _, err := c.Write(proof("bfserver peer dialer")); err != nil {
		return false, err
	}
	reply := make([]byte, 1)
	if _, err := io.ReadFull(c, reply); err != nil {
		return false, err
	}
	if reply[0] != 0 {
		return false, nil
	}
	mac := make([]byte, 32)
	if _, err := io.ReadFull(c, mac); err != nil {
		return false, err
	}
	if !hmac.Equal(mac, proof("bfserver peer acceptor")) {
		return true, errors.New("the node's proof is wrong")
	}
	return true, nil
}

// strangerDial connects to addr as a stranger: over TLS with cert when
// tlsCfg is set, then with a hello proving secret (nil: the kind byte
// alone, as a build without the handshake would).
func strangerDial(addr string, tlsCfg *tls.Config, kind byte, secret []byte) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if secret == nil {
		_, err = c.Write([]byte{kind})
	} else {
		var ok bool
		ok, err = hello(c, kind, "stranger", secret)
		if err == nil && !ok {
			err = errRefused
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

var errRefused = errors.New("the node refused the hello")

// unanswered sends a request on c and reports whether it went without an
// answer, the connection closed: never kept open, never answered.
func unanswered(t *testing.T, c net.Conn, frame []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(frame)
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("the Raft port answered a stranger (%d bytes)", n)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatal("the Raft port kept a stranger's connection open")
	}
}

// answered sends a request on c and returns the answer's outcome byte.
func answered(t *testing.T, c net.Conn, frame []byte) byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Fatalf("a member's request went unanswered: %v", err)
	}
	io.CopyN(io.Discard, c, int64(bin.BigEndian.Uint32(head[1:])))
	return head[0]
}

// raftStream is Raft's transport layer dialing as a stranger.
type raftStream struct {
	tls    *tls.Config
	secret []byte
}

func (s raftStream) Accept() (net.Conn, error) { select {} }
func (s raftStream) Close() error              { return nil }
func (s raftStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (s raftStream) Dial(a raft.ServerAddress, _ time.Duration) (net.Conn, error) {
	return strangerDial(string(a), s.tls, kindRaft, s.secret)
}

// raftCalls asks addr, over Raft's own transport, to install a snapshot
// and for a vote: the errors of each.
func raftCalls(addr string, s raftStream) (snapshot, vote error) {
	return raftSnapshot(addr, s), raftVote(addr, s)
}

// raftSnapshot asks addr to install a snapshot (of nothing Raft could
// use: a member that sent it would stop the node).
func raftSnapshot(addr string, s raftStream) error {
	trans := raft.NewNetworkTransport(s, 1, 5*time.Second, io.Discard)
	defer trans.Close()
	data := bytes.Repeat([]byte{0xbf}, 4096)
	return trans.InstallSnapshot("n1", raft.ServerAddress(addr), &raft.InstallSnapshotRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte("127.0.0.1:1")}, SnapshotVersion: 1,
		Term: 1 << 40, Leader: []byte("127.0.0.1:1"), LastLogIndex: 1 << 40, LastLogTerm: 1 << 40, Size: int64(len(data)),
	}, &raft.InstallSnapshotResponse{}, bytes.NewReader(data))
}

// raftVote asks addr for a vote of term 0, which no node grants.
func raftVote(addr string, s raftStream) error {
	trans := raft.NewNetworkTransport(s, 1, 5*time.Second, io.Discard)
	defer trans.Close()
	return trans.RequestVote("n1", raft.ServerAddress(addr), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte("127.0.0.1:1")}, Term: 0, LastLogIndex: 0, LastLogTerm: 0,
	}, &raft.RequestVoteResponse{})
}

// noStrangerChanges checks that nothing a stranger asked for happened:
// no user named user, the same three members.
func noStrangerChanges(t *testing.T, nodes []*node, clients []*redis.Client, user string) {
	t.Helper()
	for i, c := range clients {
		if err := c.Do(ctx(t), "ACL", "GETUSER", user).Err(); err != redis.Nil {
			t.Fatalf("node %s: ACL GETUSER %s = %v: a stranger's forwarded write was applied", nodes[i].addr, user, err)
		}
		m, err := c.Do(ctx(t), "BFCLUSTER", "MEMBERS").Slice()
		if err != nil || len(m) != 3 {
			t.Fatalf("node %s: %d members (%v): a stranger changed the membership", nodes[i].addr, len(m), err)
		}
		if strings.Contains(fmt.Sprint(m), "rogue") {
			t.Fatalf("node %s: a stranger joined: %v", nodes[i].addr, m)
		}
	}
}

// TestPeerPortRefusesStrangers: on every node of a cluster with a secret,
// a connection that does not prove it (the kind byte alone, or a hello
// with another secret) gets no answer to a forwarded ACL SETUSER, a join,
// a remove or a read index, and Raft refuses it a snapshot install; none
// of it happens. The same requests proving the secret are served (the
// forward applies), so what was refused was refused for the secret.
func TestPeerPortRefusesStrangers(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	leaderOf(t, nodes)
	var clients []*redis.Client
	for _, n := range nodes {
		clients = append(clients, n.client(2))
	}
	for _, n := range nodes {
		for name, frame := range peerRequests("evil", "n3") {
			for _, secret := range [][]byte{nil, []byte("not-the-cluster-secret")} {
				c, err := strangerDial(n.raftAddr, nil, kindPeer, secret)
				if err != nil {
					continue // refused at the hello: what the node should do
				}
				t.Run(fmt.Sprintf("%s/%s/secret=%q", n.addr, name, secret), func(t *testing.T) { unanswered(t, c, frame) })
				c.Close()
			}
		}
		if c, err := strangerDial(n.raftAddr, nil, kindPeer, []byte("not-the-cluster-secret")); !errors.Is(err, errRefused) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("%s: a hello with another secret: %v, not refused", n.raftAddr, err)
		}
		for _, s := range []raftStream{{}, {secret: []byte("not-the-cluster-secret")}} {
			snap, vote := raftCalls(n.raftAddr, s)
			if snap == nil || vote == nil {
				t.Fatalf("%s: Raft served a stranger: install snapshot %v, request vote %v", n.raftAddr, snap, vote)
			}
		}
	}
	noStrangerChanges(t, nodes, clients, "evil")
	// Proving the secret, the same requests are served.
	for _, n := range nodes {
		if vote := raftVote(n.raftAddr, raftStream{secret: []byte(testSecret)}); vote != nil {
			t.Fatalf("%s: a vote request proving the secret: %v", n.raftAddr, vote)
		}
		c, err := strangerDial(n.raftAddr, nil, kindPeer, []byte(testSecret))
		if err != nil {
			t.Fatalf("%s: a hello proving the secret: %v", n.raftAddr, err)
		}
		answered(t, c, peerRequests("", "")["read index"])
		c.Close()
	}
	leader := leaderOf(t, nodes)
	c, err := strangerDial(leader.raftAddr, nil, kindPeer, []byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	if out := answered(t, c, peerRequests("friend", "")["forward ACL SETUSER"]); out != 0 {
		t.Fatalf("a forward proving the secret failed (outcome %d)", out)
	}
	c.Close()
	waitFor(t, 10*time.Second, "the forwarded user on every node", func() bool {
		for _, c := range clients {
			if c.Do(ctx(t), "ACL", "GETUSER", "friend").Err() != nil {
				return false
			}
		}
		return true
	})
}

// TestRogueNodeCannotJoin: a node with another secret asks to join (as
// bfserver --join does, and as an operator's BFCLUSTER JOIN naming it
// would): the leader cannot authenticate with its Raft port, so it never
// becomes a member and receives nothing.
func TestRogueNodeCannotJoin(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"})
	leader := leaderOf(t, nodes)
	lc := leader.client(2)
	if err := lc.Do(ctx(t), "BF.ADD", "app:secret", "x").Err(); err != nil {
		t.Fatal(err)
	}
	rogue := &node{t: t, addr: freeAddr(t), raftAddr: freeAddr(t), dataDir: t.TempDir(),
		args: []string{"--node-id", "rogue", "--cluster-secret", "a-secret-of-the-rogues-own", "--join", leader.addr}}
	rogue.launch()
	waitFor(t, 30*time.Second, "the rogue's join to be refused", func() bool {
		return strings.Contains(rogue.logs.String(), "did not authenticate")
	})
	err := lc.Do(ctx(t), "BFCLUSTER", "JOIN", "rogue", rogue.raftAddr, rogue.addr).Err()
	if err == nil || !strings.Contains(err.Error(), "did not authenticate") {
		t.Fatalf("BFCLUSTER JOIN of the rogue: %v", err)
	}
	var clients []*redis.Client
	for _, n := range nodes {
		clients = append(clients, n.client(2))
	}
	noStrangerChanges(t, nodes, clients, "evil")
	if v, err := rogue.client(2).Do(ctx(t), "BF.EXISTS", "app:secret", "x").Int(); err == nil && v == 1 {
		t.Fatal("the rogue node holds the cluster's filters")
	}
}

// TestClusterStartChecks: a node refuses to start where its Raft port
// would let strangers in: a Raft address that is not loopback, or a join,
// with neither a secret nor cluster TLS; a secret too short; cluster TLS
// whose CA also signs the clients' certificates and names no node.
func TestClusterStartChecks(t *testing.T) {
	p := newPKI(t, "node")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"raft on every address", []string{"--raft-addr", "0.0.0.0:" + portOf(freeAddr(t))}, "cluster-secret"},
		{"join without a secret", []string{"--join", "127.0.0.1:1"}, "cluster-secret"},
		{"short secret", []string{"--cluster-secret", "short"}, "at least 16"},
		{"one CA, no names", p.flags("--tls-cluster"), "tls-cluster-allowed-names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--addr", freeAddr(t), "--data-dir", t.TempDir()}, tc.args...)
			out, err := exec.Command(binary, args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("bfserver %v: %v, its output does not name %s:\n%s", tc.args, err, tc.want, out)
			}
		})
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// TestTLSClusterPeerIdentity: with cluster TLS, a certificate from the
// cluster's CA is not enough to take part: an application's certificate
// from the same CA is refused at the Raft port (a forward, a join, a
// remove and a snapshot install go unanswered), by the names allowed for
// nodes; and with a CA of the nodes' own, the clients' certificates are
// refused there too, while each still works on the client port.
func TestTLSClusterPeerIdentity(t *testing.T) {
	ca := newPKI(t, "node")
	_, _, app := ca.issue(t, "app")
	nodesCA := newPKI(t, "cluster-node")
	for _, tc := range []struct {
		name  string
		flags []string
		peer  tls.Certificate // a member's certificate
		pool  *x509.CertPool  // the CA of the certificates on the Raft port
	}{
		{"allowed names", ca.flags("--tls-cluster", "--tls-cluster-allowed-names", "node"), ca.cert, ca.pool},
		{"the nodes' own CA", ca.flags("--tls-cluster", "--tls-cluster-ca-cert-file", nodesCA.caFile,
			"--tls-cluster-cert-file", nodesCA.certFile, "--tls-cluster-key-file", nodesCA.keyFile), nodesCA.cert, nodesCA.pool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startClusterTLS(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, ca, tc.flags...)
			leaderOf(t, nodes)
			pool := tc.pool
			for _, n := range nodes {
				// The application's certificate works on the client port.
				c := redis.NewClient(&redis.Options{Addr: n.addr, Protocol: 2, MaxRetries: -1,
					TLSConfig: &tls.Config{ServerName: "127.0.0.1", RootCAs: ca.pool, Certificates: []tls.Certificate{app}, MinVersion: tls.VersionTLS12}})
				if err := c.Do(ctx(t), "BF.ADD", "k", n.addr).Err(); err != nil {
					t.Fatalf("the application's certificate on the client port: %v", err)
				}
				c.Close()
				appTLS := &tls.Config{ServerName: "127.0.0.1", RootCAs: pool, Certificates: []tls.Certificate{app}, MinVersion: tls.VersionTLS12}
				for name, frame := range peerRequests("evil", "n3") {
					conn, err := strangerDial(n.raftAddr, appTLS, kindPeer, nil)
					if err != nil {
						continue // refused at the TLS handshake
					}
					t.Run(n.addr+"/"+name, func(t *testing.T) { unanswered(t, conn, frame) })
					conn.Close()
				}
				if snap, vote := raftCalls(n.raftAddr, raftStream{tls: appTLS}); snap == nil || vote == nil {
					t.Fatalf("%s: Raft served the application's certificate: %v %v", n.raftAddr, snap, vote)
				}
				memberTLS := &tls.Config{ServerName: "127.0.0.1", RootCAs: pool, Certificates: []tls.Certificate{tc.peer}, MinVersion: tls.VersionTLS12}
				conn, err := strangerDial(n.raftAddr, memberTLS, kindPeer, nil)
				if err != nil {
					t.Fatalf("%s: a member's certificate: %v", n.raftAddr, err)
				}
				answered(t, conn, peerRequests("", "")["read index"])
				conn.Close()
			}
			var clients []*redis.Client
			for _, n := range nodes {
				clients = append(clients, n.client(2))
			}
			noStrangerChanges(t, nodes, clients, "evil")
		})
	}
}

// TestClusterSecretUpgrade: a running cluster without a secret (as every
// cluster before the handshake ran) takes one on by two rolling restarts,
// as docs/OPERATIONS.md says: first every node with the secret and
// cluster-secret-transition, then every node with the secret alone. It
// serves writes through every node throughout, loses none, and ends
// refusing peers without the secret.
func TestClusterSecretUpgrade(t *testing.T) {
	nodes := startCluster(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, "--cluster-insecure")
	var acked []string
	write := func(stage string) {
		t.Helper()
		leaderOf(t, nodes)
		for _, n := range nodes {
			item := stage + "@" + n.addr
			var err error
			waitFor(t, 30*time.Second, "a write through "+n.addr, func() bool {
				err = n.client(2).Do(ctx(t), "BF.ADD", "upgrade", item).Err()
				return err == nil
			})
			acked = append(acked, item)
		}
	}
	restart := func(stage string, auth ...string) {
		for _, n := range nodes {
			n.stop()
			var args []string
			for i := 0; i < len(n.args); i++ {
				switch n.args[i] {
				case "--cluster-insecure", "--cluster-secret-transition":
				case "--cluster-secret":
					i++
				default:
					args = append(args, n.args[i])
				}
			}
			n.args = append(args, auth...)
			n.launch()
			write(stage + "/" + n.addr)
		}
	}
	write("insecure")
	restart("transition", "--cluster-secret", testSecret, "--cluster-secret-transition")
	restart("secret", "--cluster-secret", testSecret)
	for _, n := range nodes {
		c := n.client(2)
		for _, item := range acked {
			if v, err := c.Do(ctx(t), "BF.EXISTS", "upgrade", item).Int(); err != nil || v != 1 {
				t.Fatalf("%s: acknowledged %s answers %v %v", n.addr, item, v, err)
			}
		}
		conn, err := strangerDial(n.raftAddr, nil, kindPeer, nil)
		if err == nil {
			unanswered(t, conn, peerRequests("", "")["read index"])
			conn.Close()
		}
	}
}
