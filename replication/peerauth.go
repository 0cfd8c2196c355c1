package replication

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
)

// Peer authentication: every connection to the Raft port, Raft's own and
// the peer protocol's, proves before it is served that the dialer is a
// member of the cluster. Two ways, either or both:
//   - cluster TLS (Options.TLS): mutual TLS with the cluster's CA, the
//     peer's certificate checked against the names allowed for nodes;
//   - the cluster secret (Options.ClusterSecret), which every node shares,
//     proven both ways in a challenge-response (HMAC-SHA256 over both
//     sides' nonces) so that it never crosses the network, nor does
//     anything a stranger could replay.
//
// The secret's handshake, on a fresh connection:
//
//	dialer → hello:     "BFP" 1, kind, len(id), id, nonce_d (32 bytes)
//	acceptor → nonce_a (32 bytes)
//	dialer → proof:     HMAC(secret, "bfserver peer dialer" ‖ hello ‖ nonce_a)
//	acceptor → 0, HMAC(secret, "bfserver peer acceptor" ‖ hello ‖ nonce_a)
//	           or 1 (refused), and it closes
//
// The dialer proves first, so a stranger dialing the port learns nothing
// computed from the secret. The acceptor's proof covers the dialer's
// nonce, so a dialer knows it reached a member, not a replay. The secret
// authenticates the connection's start only: it neither encrypts nor
// protects what follows from a host on the path, which is what cluster
// TLS is for (docs/OPERATIONS.md, Security).
//
// Without either (Options.InsecurePeers) a connection starts with its
// kind byte alone, as builds before the handshake did; in the secret's
// transition mode (Options.SecretTransition) a node accepts both and,
// dialing a node that closes at the hello, dials again without it, so a
// running cluster takes on its secret by two rolling restarts.

// helloMagic starts a hello. Its first byte is neither connection kind, so
// an acceptor tells a hello from a connection of a build without the
// handshake by the first byte.
var helloMagic = [4]byte{'B', 'F', 'P', 1}

const (
	nonceLen = 32
	macLen   = sha256.Size
	// maxIDLen bounds a node id in a hello (one length byte).
	maxIDLen = 255
	// MinSecretLen is the shortest cluster secret a node takes: the
	// handshake's proofs are open to an offline guess at a short one.
	MinSecretLen = 16
)

const (
	authAccepted byte = 0
	authRefused  byte = 1
)

var (
	labelDialer   = []byte("bfserver peer dialer")
	labelAcceptor = []byte("bfserver peer acceptor")
)

// Handshake errors.
var (
	// errAuthRefused: the acceptor refused this node's proof; it holds
	// another secret.
	errAuthRefused = errors.New("the peer refused this node's cluster secret")
	// errAuthPeer: the acceptor's proof is wrong; it is not a member.
	errAuthPeer = errors.New("the peer did not prove the cluster secret")
	// errNoHello: the acceptor closed at the hello: a node that does not
	// speak the handshake (an older build, or one without a secret).
	errNoHello = errors.New("the peer does not speak the cluster handshake")
	// errBadHello: what the dialer sent is not a hello.
	errBadHello = errors.New("malformed hello")
)

// peerAuth is one node's way of authenticating connections on the Raft
// port.
type peerAuth struct {
	secret     []byte // nil: no handshake
	transition bool   // accept connections without a hello too, and dial them
	id         string // this node's id, sent in its hellos
}

// hello is what a dialer says first.
type hello struct {
	kind  byte
	id    string
	nonce [nonceLen]byte
	raw   []byte // as sent, for the proofs
}

func mac(secret, label, transcript, nonce []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(label)
	h.Write(transcript)
	h.Write(nonce)
	return h.Sum(nil)
}

// dialHello runs the dialer's side on c, which has its deadline set.
func (a *peerAuth) dialHello(c io.ReadWriter, kind byte) error {
	id := a.id
	if len(id) > maxIDLen {
		id = id[:maxIDLen]
	}
	raw := make([]byte, 0, len(helloMagic)+2+len(id)+nonceLen)
	raw = append(raw, helloMagic[:]...)
	raw = append(raw, kind, byte(len(id)))
	raw = append(raw, id...)
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	raw = append(raw, nonce[:]...)
	if _, err := c.Write(raw); err != nil {
		return err
	}
	var theirs [nonceLen]byte
	if _, err := io.ReadFull(c, theirs[:]); err != nil {
		if isClosed(err) {
			return errNoHello
		}
		return err
	}
	if _, err := c.Write(mac(a.secret, labelDialer, raw, theirs[:])); err != nil {
		return err
	}
	var reply [1 + macLen]byte
	if _, err := io.ReadFull(c, reply[:1]); err != nil {
		return err
	}
	if reply[0] != authAccepted {
		return errAuthRefused
	}
	if _, err := io.ReadFull(c, reply[1:]); err != nil {
		return err
	}
	if !hmac.Equal(reply[1:], mac(a.secret, labelAcceptor, raw, theirs[:])) {
		return errAuthPeer
	}
	return nil
}

// readHello reads a hello whose magic was already read.
func readHello(r io.Reader) (*hello, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	if head[0] != muxRaft && head[0] != muxPeer {
		return nil, errBadHello
	}
	rest := make([]byte, int(head[1])+nonceLen)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, err
	}
	h := &hello{kind: head[0], id: string(rest[:head[1]])}
	copy(h.nonce[:], rest[head[1]:])
	h.raw = append(append(append(make([]byte, 0, len(helloMagic)+2+len(rest)), helloMagic[:]...), head[:]...), rest...)
	return h, nil
}

// accept runs the acceptor's side on c, which has its deadline set. It
// returns the connection's kind and the id its dialer gave (empty from a
// dialer without a hello).
func (a *peerAuth) accept(c io.ReadWriter) (kind byte, id string, err error) {
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return 0, "", err
	}
	if first[0] != helloMagic[0] {
		// No hello: a build without the handshake, or a node without a
		// secret.
		if a.secret != nil && !a.transition {
			return 0, "", errNoHello
		}
		if first[0] != muxRaft && first[0] != muxPeer {
			return 0, "", errBadHello
		}
		return first[0], "", nil
	}
	var magic [len(helloMagic) - 1]byte
	if _, err := io.ReadFull(c, magic[:]); err != nil {
		return 0, "", err
	}
	if !bytes.Equal(magic[:], helloMagic[1:]) {
		return 0, "", errBadHello
	}
	h, err := readHello(c)
	if err != nil {
		return 0, "", err
	}
	if a.secret == nil {
		// A node without a secret (cluster TLS alone, or insecure) takes
		// no hello: the dialer is configured differently.
		return 0, "", fmt.Errorf("%w: this node has no cluster secret", errNoHello)
	}
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	if _, err := c.Write(nonce[:]); err != nil {
		return 0, "", err
	}
	var proof [macLen]byte
	if _, err := io.ReadFull(c, proof[:]); err != nil {
		return 0, "", err
	}
	if !hmac.Equal(proof[:], mac(a.secret, labelDialer, h.raw, nonce[:])) {
		c.Write([]byte{authRefused})
		return 0, "", fmt.Errorf("%w (node id %q)", errAuthRefused, h.id)
	}
	reply := append([]byte{authAccepted}, mac(a.secret, labelAcceptor, h.raw, nonce[:])...)
	if _, err := c.Write(reply); err != nil {
		return 0, "", err
	}
	return h.kind, h.id, nil
}

// isClosed reports whether err is the peer closing (or resetting) the
// connection, as a node that does not speak the handshake does at a hello.
func isClosed(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}
