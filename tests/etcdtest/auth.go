package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// RootPassword is the password EnableAuth gives the root user.
const RootPassword = "etcdtest-root-pw"

// EnableAuth turns on etcd auth on the cluster through cli (a client
// without credentials, made before auth is on): it creates user root
// (RootPassword, role root) and user with password, whose role of the same
// name has readwrite on exactly the keys under prefix+"/" (e.g. "/dm/"),
// and enables auth. Clients made before keep working only for requests
// that need no permission; make new ones with credentials.
func EnableAuth(t testing.TB, cli *clientv3.Client, prefix, user, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []struct {
		what string
		do   func() error
	}{
		{"add user root", func() error { _, err := cli.UserAdd(ctx, "root", RootPassword); return err }},
		{"add role root", func() error { _, err := cli.RoleAdd(ctx, "root"); return err }},
		{"grant role root", func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err }},
		{"add user " + user, func() error { _, err := cli.UserAdd(ctx, user, password); return err }},
		{"add role " + user, func() error { _, err := cli.RoleAdd(ctx, user); return err }},
		{"grant prefix to role " + user, func() error {
			p := prefix + "/"
			_, err := cli.RoleGrantPermission(ctx, user, p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"grant role " + user, func() error { _, err := cli.UserGrantRole(ctx, user, user); return err }},
		{"enable auth", func() error { _, err := cli.AuthEnable(ctx); return err }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("etcdtest: enable auth: %s: %v", s.what, err)
		}
	}
}

// AuthClient returns a new client on Endpoints logged in as user, closed in
// t.Cleanup.
func (c *Cluster) AuthClient(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
		Username: user, Password: password, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: new client for user %s: %v", user, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
