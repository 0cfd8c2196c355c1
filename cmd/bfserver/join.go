package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// joiner asks a member to add this node through the member's client port,
// as an operator would (BFCLUSTER JOIN), with this node's password and
// client TLS settings.
type joiner struct {
	password string
	tls      *tls.Config
	log      *slog.Logger
}

func (j *joiner) Join(ctx context.Context, member, id, raftAddr, respAddr string) error {
	opts := &redis.Options{Addr: member, Password: j.password, Protocol: 2, DialTimeout: 2 * time.Second,
		MaxRetries: -1, DisableIdentity: true, ContextTimeoutEnabled: true, PoolSize: 1}
	if j.tls != nil {
		cfg := &tls.Config{Certificates: j.tls.Certificates, RootCAs: j.tls.ClientCAs, MinVersion: tls.VersionTLS12}
		opts.TLSConfig = cfg
	}
	c := redis.NewClient(opts)
	defer c.Close()
	return c.Do(ctx, "BFCLUSTER", "JOIN", id, raftAddr, respAddr).Err()
}

// routeLibraryLogs sends what libraries log on their own through slog.
func routeLibraryLogs(l *slog.Logger) { redis.SetLogger(redisLogger{l}) }

// redisLogger is go-redis's logger over slog.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...), "component", "go-redis")
}
