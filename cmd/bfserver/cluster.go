package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/bfserver/bfserver/replication"
)

// clusterAuth is how this node authenticates its peers on the Raft port:
// the cluster secret, cluster TLS's own certificate, CA and allowed names,
// or neither (insecure, by the operator's choice).
type clusterAuth struct {
	secret       string
	secretFile   string
	transition   bool
	insecure     bool
	cert, key    string
	ca           string
	allowedNames string

	secretBytes []byte // resolved from secret or secretFile
}

func addClusterFlags(fs *flag.FlagSet, a *clusterAuth) {
	fs.StringVar(&a.secret, "cluster-secret", "", fmt.Sprintf("the secret every node of the cluster shares (at least %d bytes; `openssl rand -hex 32` makes one): the Raft port lets in only nodes that prove they hold it, in a challenge-response that never sends it; needed, or tls-cluster, to form a cluster", replication.MinSecretLen))
	fs.StringVar(&a.secretFile, "cluster-secret-file", "", "read cluster-secret from this file (its first line)")
	fs.BoolVar(&a.transition, "cluster-secret-transition", false, "also let in peers without the secret, and reach nodes that do not ask for it: only while a running cluster takes on its secret (docs/OPERATIONS.md)")
	fs.BoolVar(&a.insecure, "cluster-insecure", false, "let any host that reaches the Raft port take part in the cluster without tls-cluster or cluster-secret: only where every host on the network is trusted")
	fs.StringVar(&a.cert, "tls-cluster-cert-file", "", "certificate nodes present to each other with tls-cluster (default: tls-cert-file)")
	fs.StringVar(&a.key, "tls-cluster-key-file", "", "private key of tls-cluster-cert-file (default: tls-key-file)")
	fs.StringVar(&a.ca, "tls-cluster-ca-cert-file", "", "CA that signs the nodes' certificates with tls-cluster, apart from the clients' (default: tls-ca-cert-file, which then needs tls-cluster-allowed-names)")
	fs.StringVar(&a.allowedNames, "tls-cluster-allowed-names", "", "comma-separated names, one of which a node's certificate must carry (as its CN or a DNS name) with tls-cluster")
}

// resolve reads the secret from its file and checks the settings agree.
func (a *clusterAuth) resolve() error {
	switch {
	case a.secret != "" && a.secretFile != "":
		return errors.New("cluster-secret and cluster-secret-file: give one, not both")
	case a.secretFile != "":
		b, err := os.ReadFile(a.secretFile)
		if err != nil {
			return fmt.Errorf("cluster-secret-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimRight(line, "\r \t")
		if line == "" {
			return fmt.Errorf("cluster-secret-file: %s holds no secret", a.secretFile)
		}
		a.secretBytes = []byte(line)
	case a.secret != "":
		a.secretBytes = []byte(a.secret)
	}
	if n := len(a.secretBytes); n > 0 && n < replication.MinSecretLen {
		return fmt.Errorf("cluster-secret: %d bytes is too short to keep out a guess: give at least %d (openssl rand -hex 32)", n, replication.MinSecretLen)
	}
	if a.transition && a.secretBytes == nil {
		return errors.New("cluster-secret-transition needs cluster-secret or cluster-secret-file")
	}
	if a.insecure && a.secretBytes != nil {
		return errors.New("cluster-insecure and cluster-secret: give one, not both")
	}
	return nil
}

// tls builds the mutual-TLS configs between nodes: this node's certificate
// (the cluster's own, else the clients' server certificate), the cluster's
// CA (its own, else clientCA) and the names allowed for nodes. A cluster
// that trusts the clients' CA must name its nodes: any certificate that CA
// gave an application would pass for a node otherwise.
func (a *clusterAuth) tls(client *tls.Config, clientCA *x509.CertPool) (*replication.TLS, error) {
	var cert tls.Certificate
	switch {
	case a.cert != "" || a.key != "":
		var err error
		if cert, err = tls.LoadX509KeyPair(a.cert, a.key); err != nil {
			return nil, fmt.Errorf("tls-cluster-cert-file, tls-cluster-key-file: %w", err)
		}
	case client != nil:
		cert = client.Certificates[0]
	default:
		return nil, errors.New("tls-cluster needs tls-cluster-cert-file and tls-cluster-key-file (or tls-cert-file and tls-key-file)")
	}
	pool := clientCA
	if a.ca != "" {
		var err error
		if pool, err = loadPool("tls-cluster-ca-cert-file", a.ca); err != nil {
			return nil, err
		}
	}
	if pool == nil {
		return nil, errors.New("tls-cluster needs tls-cluster-ca-cert-file (or tls-ca-cert-file)")
	}
	var names []string
	for _, n := range strings.Split(a.allowedNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if a.ca == "" && len(names) == 0 {
		return nil, errors.New("tls-cluster: the nodes' CA is tls-ca-cert-file, which signs the clients' certificates too, so any of them would pass for a node: " +
			"give the nodes a CA of their own (tls-cluster-ca-cert-file) or the names their certificates carry (tls-cluster-allowed-names)")
	}
	server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	peerClient := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &replication.TLS{Server: server, Client: peerClient, AllowedNames: names}, nil
}
