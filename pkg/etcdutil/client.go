// Package etcdutil connects to etcd the same way in every binary: endpoints,
// timeouts, TLS and etcd auth from the worker/dmctl flags. It owns no etcd
// keys: the connection probe reads a key under the cluster prefix, so a user
// whose role covers only the prefix can connect.
package etcdutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Options are the connection settings.
type Options struct {
	Endpoints []string
	// CACert, Cert and Key are PEM file paths for TLS; all empty = plain.
	CACert, Cert, Key string
	// Username and Password log in to a cluster with auth enabled (both or
	// neither). The password appears in no error text.
	Username, Password string
	// Prefix is the cluster prefix (e.g. /dm); the connection probe reads
	// Prefix+"/", which a role limited to the prefix may read. Empty probes "/".
	Prefix      string
	DialTimeout time.Duration
	Logger      *zap.Logger
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
		Username:             o.Username,
		Password:             o.Password,
	}
	if (o.Username == "") != (o.Password == "") {
		return nil, errors.New("etcd auth: give both --etcd-username and --etcd-password, or neither")
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
		if authErr := explainAuth(err, o); authErr != nil {
			return nil, authErr
		}
		return nil, fmt.Errorf("connect to etcd %v: %w", o.Endpoints, err)
	}
	cctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	// One key under the prefix: readable by a role that covers only the
	// prefix, unlike any key outside it.
	if _, err := cli.Get(cctx, o.Prefix+"/"); err != nil {
		_ = cli.Close()
		if authErr := explainAuth(err, o); authErr != nil {
			return nil, authErr
		}
		return nil, fmt.Errorf("etcd at %v does not answer within %s: %w; check --etcd-endpoints and that etcd runs", o.Endpoints, o.DialTimeout, err)
	}
	return cli, nil
}

// ErrAuth marks connection failures caused by etcd auth (no or wrong
// credentials, or a role that does not cover the prefix).
var ErrAuth = errors.New("etcd auth failed")

// explainAuth turns etcd's auth errors into one naming etcd auth, the user
// and the fix; nil when err is not about auth. The password is never named.
func explainAuth(err error, o Options) error {
	user := "no user (--etcd-username not given)"
	if o.Username != "" {
		user = fmt.Sprintf("user %q", o.Username)
	}
	switch {
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrGRPCUserEmpty):
		return fmt.Errorf("%w: etcd at %v has auth enabled and %s was given: %v; give --etcd-username and --etcd-password",
			ErrAuth, o.Endpoints, user, err)
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrGRPCAuthFailed):
		return fmt.Errorf("%w: etcd at %v refused %s: %v; check --etcd-username and --etcd-password",
			ErrAuth, o.Endpoints, user, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrGRPCPermissionDenied):
		return fmt.Errorf("%w: etcd at %v denies %s reading %q: %v; grant the user's role readwrite on the key prefix %q (etcdctl role grant-permission ROLE readwrite %s --prefix)",
			ErrAuth, o.Endpoints, user, o.Prefix+"/", err, o.Prefix+"/", o.Prefix+"/")
	case errors.Is(err, rpctypes.ErrAuthNotEnabled), errors.Is(err, rpctypes.ErrGRPCAuthNotEnabled):
		return fmt.Errorf("%w: etcd at %v does not have auth enabled but %s was given: %v; drop --etcd-username/--etcd-password or enable auth in etcd",
			ErrAuth, o.Endpoints, user, err)
	case errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrGRPCInvalidAuthToken):
		return fmt.Errorf("%w: etcd at %v rejected the auth token of %s: %v; retry", ErrAuth, o.Endpoints, user, err)
	}
	return nil
}
