package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/tests/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func get(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// waitValue waits until key reads want through cli; a timeout reports the
// last value or error.
func waitValue(ctx context.Context, t *testing.T, cli *clientv3.Client, key, want, what string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, func() error {
		v, err := get(ctx, t, cli, key)
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("%s = %q, want %q", key, v, want)
		}
		return nil
	})
}

func TestStopRestartKeepsDataAndPorts(t *testing.T) {
	start := time.Now()
	c := Start(t)
	t.Logf("start took %s", time.Since(start))
	cli := c.Client(t)
	ctx := t.Context()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	eps := c.Endpoints()

	stopStart := time.Now()
	c.Stop()
	c.Stop() // idempotent
	if d := time.Since(stopStart); d > 2*time.Second {
		t.Errorf("Stop with a connected client took %s", d)
	}
	if _, err := get(ctx, t, cli, "k"); err == nil {
		t.Fatal("Get succeeded while etcd is stopped")
	}

	c.Restart(t)
	if got := c.Endpoints(); got[0] != eps[0] {
		t.Fatalf("endpoints changed across restart: %v -> %v", eps, got)
	}
	waitValue(ctx, t, cli, "k", "v1", "k readable again after the restart")
}

func TestPartitionCutsBridgedClientsOnly(t *testing.T) {
	c := Start(t)
	cli := c.Client(t)
	direct := c.DirectClient(t)
	ctx := t.Context()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}

	c.Partition()
	if _, err := get(ctx, t, cli, "k"); err == nil {
		t.Fatal("bridged Get succeeded during partition")
	}
	if _, err := direct.Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("direct Put during partition: %v", err)
	}

	c.Heal(t)
	waitValue(ctx, t, cli, "k", "v2", "the direct write readable through the bridge after Heal")
}

func TestCompactAndRevision(t *testing.T) {
	c := Start(t)
	cli := c.Client(t)
	ctx := t.Context()
	r0 := c.Revision(t)
	resp, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Revision(t); got != resp.Header.Revision || got <= r0 {
		t.Fatalf("Revision() = %d, want %d (> %d)", got, resp.Header.Revision, r0)
	}
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	c.Compact(t, c.Revision(t))
	_, err = cli.Get(ctx, "k", clientv3.WithRev(resp.Header.Revision))
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("Get at compacted revision: err = %v, want ErrCompacted", err)
	}
}
