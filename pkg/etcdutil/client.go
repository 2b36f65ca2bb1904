// Package etcdutil connects to etcd the same way in every binary: endpoints,
// timeouts and TLS from the worker/dmctl flags. It owns no etcd keys.
package etcdutil

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options are the connection settings.
type Options struct {
	Endpoints []string
	// CACert, Cert and Key are PEM file paths for TLS; all empty = plain.
	CACert, Cert, Key string
	DialTimeout       time.Duration
	Logger            *zap.Logger
}

// Connect builds a client and checks that the cluster answers within the
// dial timeout, so that an unreachable etcd is reported at once with the
// endpoints named.
func Connect(ctx context.Context, o Options) (*clientv3.Client, error) {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	cfg := clientv3.Config{
		Endpoints:            o.Endpoints,
		DialTimeout:          o.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               o.Logger.WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
	}
	if o.CACert != "" || o.Cert != "" || o.Key != "" {
		tlsInfo := transport.TLSInfo{CertFile: o.Cert, KeyFile: o.Key, TrustedCAFile: o.CACert}
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd TLS (cacert %q, cert %q, key %q): %w", o.CACert, o.Cert, o.Key, err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", o.Endpoints, err)
	}
	cctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, "health-probe"); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd at %v does not answer within %s: %w; check --etcd-endpoints and that etcd runs", o.Endpoints, o.DialTimeout, err)
	}
	return cli, nil
}
