package etcdutil_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/etcdutil"
	"github.com/dmworker/dm-worker/tests/etcdtest"
)

const (
	authUser     = "dmuser"
	authPassword = "dm-secret-Pw-0417"
)

// TestConnectAuth: with etcd auth on and a user whose role covers only the
// prefix, Connect works with the right user (the probe reads under the
// prefix) and fails clearly, without the password, otherwise.
func TestConnectAuth(t *testing.T) {
	c := etcdtest.Start(t)
	etcdtest.EnableAuth(t, c.Client(t), "/dm", authUser, authPassword)
	ctx := context.Background()
	opts := func(user, pw, prefix string) etcdutil.Options {
		return etcdutil.Options{Endpoints: c.Endpoints(), Username: user, Password: pw, Prefix: prefix, DialTimeout: 5 * time.Second}
	}

	cli, err := etcdutil.Connect(ctx, opts(authUser, authPassword, "/dm"))
	if err != nil {
		t.Fatalf("right user: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/dm/x", "1"); err != nil {
		t.Fatalf("put under the prefix: %v", err)
	}
	if _, err := cli.Put(ctx, "/other", "1"); err == nil {
		t.Fatal("the prefix role wrote outside the prefix: the test's auth setup is wrong")
	}
	lease, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatalf("lease grant: %v", err)
	}
	if _, err := cli.Put(ctx, "/dm/leased", "1", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("put with lease: %v", err)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatalf("revoke: %v", err)
	}

	tests := []struct {
		name     string
		o        etcdutil.Options
		contains []string
	}{
		{name: "no credentials", o: opts("", "", "/dm"), contains: []string{"etcd auth", "auth enabled", "--etcd-username"}},
		{name: "wrong password", o: opts(authUser, "wrong-Pw-9", "/dm"), contains: []string{"etcd auth", `user "dmuser"`, "--etcd-password"}},
		{name: "unknown user", o: opts("nobody", authPassword, "/dm"), contains: []string{"etcd auth", `user "nobody"`}},
		{name: "prefix not covered", o: opts(authUser, authPassword, "/other"), contains: []string{"etcd auth", "denies", "readwrite", "/other/"}},
		{name: "user without password", o: opts(authUser, "", "/dm"), contains: []string{"etcd auth", "both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli, err := etcdutil.Connect(ctx, tt.o)
			if err == nil {
				cli.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, etcdutil.ErrAuth) && tt.name != "user without password" {
				t.Errorf("error does not wrap etcdutil.ErrAuth: %v", err)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			for _, pw := range []string{authPassword, "wrong-Pw-9", etcdtest.RootPassword} {
				if strings.Contains(err.Error(), pw) {
					t.Errorf("error shows a password: %v", err)
				}
			}
		})
	}
}

// TestConnectNoAuth: without auth, the probe under the prefix works for the
// default and the root prefix.
func TestConnectNoAuth(t *testing.T) {
	c := etcdtest.Start(t)
	for _, prefix := range []string{"/dm", "/", ""} {
		cli, err := etcdutil.Connect(context.Background(), etcdutil.Options{Endpoints: c.Endpoints(), Prefix: prefix})
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		cli.Close()
	}
}
