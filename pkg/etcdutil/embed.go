package etcdutil

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// peerURLFile keeps the peer URL chosen at first start, so the member
// restarts with the URL its data directory knows.
const peerURLFile = "dm-peer-url"

// Embedded is a single-node etcd running inside the process.
type Embedded struct {
	etcd *embed.Etcd
}

// StartEmbedded starts a single-node etcd with its data in dir, serving
// clients on clientURL (e.g. http://127.0.0.1:2379), and waits until it
// is ready (at most 60 s).
func StartEmbedded(dir, clientURL string, logger *zap.Logger) (*Embedded, error) {
	cu, err := url.Parse(clientURL)
	if err != nil || cu.Host == "" {
		return nil, fmt.Errorf("embedded etcd: client URL %q is not a URL like http://127.0.0.1:2379", clientURL)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: create data dir: %w", err)
	}
	peer, err := peerURL(dir, cu.Hostname())
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "dm-worker"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.LogLevel = "error"
	// A worker with many subtasks rewrites a large status value every few
	// seconds: etcd keeps every raft entry in memory until a snapshot
	// (10,000 entries by default) and every revision on disk until a
	// compaction (never by default), so both grow without bound. Snapshot
	// often (a single member's snapshot is cheap) and keep ten minutes of
	// history, far more than a watch needs to resume after a restart.
	cfg.SnapshotCount = 100
	cfg.SnapshotCatchUpEntries = 100
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "10m"
	if logger != nil {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(ServerLogger(logger).Named("etcd"))
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd on %s (data %s): %w", clientURL, dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd on %s: %w", clientURL, err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("embedded etcd did not become ready within 60s")
	}
	return &Embedded{etcd: e}, nil
}

// Err reports a fatal error of the running server.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops the server and waits for it.
func (e *Embedded) Close() { e.etcd.Close() }

// peerURL returns the peer URL kept in dir, or picks a free port on host
// and keeps it.
func peerURL(dir, host string) (*url.URL, error) {
	path := filepath.Join(dir, peerURLFile)
	if b, err := os.ReadFile(path); err == nil {
		u, err := url.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("embedded etcd: %s holds no URL: %w; delete it to pick a new peer port", path, err)
		}
		return u, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: pick a peer port on %s: %w", host, err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	u := &url.URL{Scheme: "http", Host: addr}
	if err := os.WriteFile(path, []byte(u.String()+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("embedded etcd: keep peer URL: %w", err)
	}
	return u, nil
}
