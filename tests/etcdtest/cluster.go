// Package etcdtest runs a single-node embedded etcd for tests, on random
// free loopback ports with its data in a test temp dir, and lets a test stop,
// restart, partition and compact it.
//
// Clients reach the server through a small TCP bridge so that Stop and
// Partition cut every client connection at once. It owns only test servers
// it starts; it must never touch an etcd it did not start.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// readyTimeout bounds how long a start or restart may take.
const readyTimeout = 20 * time.Second

// Cluster is one embedded etcd server and the bridge in front of it.
type Cluster struct {
	dir       string
	clientURL url.URL // etcd's own client listener
	peerURL   url.URL
	bridge    *bridge

	opts        Options
	mu          sync.Mutex
	etcd        *embed.Etcd // nil while stopped
	partitioned bool        // bridge held down by Partition until Heal
}

// Options change how Start runs the server.
type Options struct {
	// AuthTokenTTL is the lifetime of etcd's simple auth tokens (default
	// etcd's 300s); a short one makes auth tests renew tokens.
	AuthTokenTTL time.Duration
}

// Start runs a single-node embedded etcd on random free loopback ports with
// its data in t.TempDir(), waits until it serves, and stops it in t.Cleanup.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{dir: t.TempDir(), opts: opts}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		clientURL, err := freeURL()
		if err != nil {
			t.Fatal(err)
		}
		peerURL, err := freeURL()
		if err != nil {
			t.Fatal(err)
		}
		c.clientURL, c.peerURL = clientURL, peerURL
		e, err := c.startEtcd()
		if errors.Is(err, syscall.EADDRINUSE) {
			lastErr = err
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		c.etcd = e
		lastErr = nil
		break
	}
	if lastErr != nil {
		t.Fatalf("etcdtest: start embedded etcd: %v", lastErr)
	}
	b, err := newBridge(c.clientURL.Host)
	if err != nil {
		c.etcd.Close()
		t.Fatal(err)
	}
	c.bridge = b
	t.Cleanup(c.Stop)
	return c
}

// freeURL picks a free loopback port. Another process may take it before
// etcd binds it; Start retries on "address in use".
func freeURL() (url.URL, error) {
	port, err := testutil.FreePort()
	if err != nil {
		return url.URL{}, fmt.Errorf("etcdtest: %w", err)
	}
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, nil
}

func (c *Cluster) startEtcd() (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = c.dir
	cfg.ListenClientUrls = []url.URL{c.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{c.clientURL}
	cfg.ListenPeerUrls = []url.URL{c.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{c.peerURL}
	cfg.InitialCluster = cfg.Name + "=" + c.peerURL.String()
	cfg.InitialClusterToken = "etcdtest"
	cfg.UnsafeNoFsync = true
	cfg.EnableGRPCGateway = false
	cfg.TickMs = 10
	// The cheapest bcrypt: auth tests hash and check passwords often, and
	// under -race the default cost takes seconds each time.
	cfg.BcryptCost = 4
	if c.opts.AuthTokenTTL > 0 {
		cfg.AuthTokenTTL = uint(max(1, c.opts.AuthTokenTTL/time.Second))
	}
	cfg.ElectionMs = 100
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	lg, err := serverLogger()
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start embedded etcd in %s: %w", c.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdtest: embedded etcd failed while starting: %w", err)
	case <-time.After(readyTimeout):
		e.Close()
		return nil, fmt.Errorf("etcdtest: embedded etcd not ready after %s", readyTimeout)
	}
}

// Endpoints returns the client URLs, e.g. http://127.0.0.1:PORT. They stay
// the same across Stop/Restart.
func (c *Cluster) Endpoints() []string {
	return []string{"http://" + c.bridge.addr}
}

// DirectEndpoints returns etcd's own client URL, which bypasses the bridge
// and so keeps working during a Partition.
func (c *Cluster) DirectEndpoints() []string {
	return []string{c.clientURL.String()}
}

// Client returns a new client on Endpoints, closed in t.Cleanup. It
// reconnects quickly (backoff capped at 1s) after Stop/Restart or Heal.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return newClient(t, c.Endpoints())
}

// DirectClient returns a new client on DirectEndpoints, closed in t.Cleanup.
func (c *Cluster) DirectClient(t testing.TB) *clientv3.Client {
	t.Helper()
	return newClient(t, c.DirectEndpoints())
}

func newClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		t.Fatalf("etcdtest: new client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() {
		if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("etcdtest: close client: %v", err)
		}
	})
	return cli
}

// Stop stops the server; clients see it down at once. It is idempotent.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bridge.down()
	if c.etcd != nil {
		c.etcd.Close()
		c.etcd = nil
	}
}

// Restart starts the server again on the same ports and data and waits until
// it serves. Clients reconnect unless the cluster is partitioned.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.etcd != nil {
		t.Fatal("etcdtest: Restart while running; call Stop first")
	}
	var lastErr error
	for attempt := 0; attempt < 50; attempt++ {
		e, err := c.startEtcd()
		if err == nil {
			c.etcd = e
			lastErr = nil
			break
		}
		lastErr = err
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the old sockets may linger briefly
	}
	if lastErr != nil {
		t.Fatal(lastErr)
	}
	if !c.partitioned {
		if err := c.bridge.up(); err != nil {
			t.Fatal(err)
		}
	}
}

// Partition cuts every client connection through Endpoints and refuses new
// ones until Heal, while the server keeps running (DirectClient still works).
func (c *Cluster) Partition() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitioned = true
	c.bridge.down()
}

// Heal ends a Partition: Endpoints accept connections again (if the server
// runs).
func (c *Cluster) Heal(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitioned = false
	if c.etcd == nil {
		return
	}
	if err := c.bridge.up(); err != nil {
		t.Fatal(err)
	}
}

// Compact compacts the store (physically) up to rev.
func (c *Cluster) Compact(t testing.TB, rev int64) {
	t.Helper()
	c.withDirect(t, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
		return err
	})
}

// Revision returns the current store revision.
func (c *Cluster) Revision(t testing.TB) int64 {
	t.Helper()
	var rev int64
	c.withDirect(t, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.Get(ctx, "\x00etcdtest-revision")
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev
}

func (c *Cluster) withDirect(t testing.TB, f func(context.Context, *clientv3.Client) error) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.DirectEndpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: direct client: %v", err)
	}
	defer func() {
		if err := cli.Close(); err != nil {
			t.Errorf("etcdtest: close direct client: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f(ctx, cli); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
}
