package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/ha"
	"github.com/dmworker/dm-worker/tests/etcdtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// Helpers of the failover tests (issue 15): a fleet of dm-worker processes
// started with --scheduler on one etcd, each reaching etcd through a TCP
// proxy of its own so that one worker can be cut off etcd while it runs.

const (
	// foTTL is the workers' --keepalive-ttl.
	foTTL = 3 * time.Second
	// foBudget is how long a failover may take after a worker's death:
	// its TTL plus 2 s (issue 15's acceptance).
	foBudget = foTTL + 2*time.Second
)

// foFleet is an etcd and the dm-worker processes w1..wn on it.
type foFleet struct {
	t       *testing.T
	c       *cluster // dmctl's view (through etcdtest's bridge) and a direct client
	workers []*foWorker
}

// foWorker is one worker of the fleet: its options (same name and data
// dir on every restart), its proxy to etcd and its current process.
type foWorker struct {
	name  string
	opts  workerOptions
	proxy *etcdtest.Proxy
	proc  *workerProc
}

// foStartFleet starts an etcd and n workers w1..wn with --scheduler and
// waits until every one is alive (its keepalive key exists).
func foStartFleet(t *testing.T, n int) *foFleet {
	t.Helper()
	etcd := etcdtest.Start(t)
	f := &foFleet{t: t, c: &cluster{t: t, endpoints: strings.Join(etcd.Endpoints(), ","), prefix: testPrefix, direct: etcd.DirectClient(t)}}
	target := strings.TrimPrefix(etcd.DirectEndpoints()[0], "http://")
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("w%d", i+1)
		p := etcdtest.NewProxy(t, target)
		w := &foWorker{name: names[i], proxy: p, opts: workerOptions{
			name: names[i], endpoints: "http://" + p.Addr(), prefix: f.c.prefix, dataDir: t.TempDir(),
			args: []string{"--scheduler", "--keepalive-ttl", foTTL.String(), "--log-format", "json"},
		}}
		w.proc = startWorker(t, w.opts)
		f.workers = append(f.workers, w)
	}
	f.waitAlive(10*time.Second, names...)
	return f
}

// worker returns the fleet's worker name.
func (f *foFleet) worker(name string) *foWorker {
	f.t.Helper()
	for _, w := range f.workers {
		if w.name == name {
			return w
		}
	}
	f.t.Fatalf("no worker %q in the fleet", name)
	return nil
}

// kill kills worker name with SIGKILL, waits for the process and returns
// the moment of the signal.
func (f *foFleet) kill(name string) time.Time {
	f.t.Helper()
	w := f.worker(name)
	at := time.Now()
	w.proc.signal(f.t, syscall.SIGKILL)
	if code, err := w.proc.wait(10 * time.Second); err != nil || code != -1 {
		f.t.Fatalf("kill -9 of %s: exit code %d, %v; want killed by the signal", name, code, err)
	}
	return at
}

// restart starts the process of worker name again (same data dir) and
// waits until it is alive.
func (f *foFleet) restart(name string) {
	f.t.Helper()
	w := f.worker(name)
	w.proc = startWorker(f.t, w.opts)
	f.waitAlive(10*time.Second, name)
}

// putSource writes the source config yaml into etcd directly, like `dmctl
// source create` but without binding it: the scheduler must.
func (f *foFleet) putSource(yaml string) {
	f.t.Helper()
	cfg, err := config.ParseSourceConfig([]byte(yaml))
	if err != nil {
		f.t.Fatalf("source config: %v\n%s", err, yaml)
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Second)
	defer cancel()
	if _, err := ha.NewStore(f.c.direct, f.c.prefix).PutSourceConfig(ctx, cfg); err != nil {
		f.t.Fatal(err)
	}
}

// foBound is one P/source/bound/{worker} key.
type foBound struct {
	Source string `json:"source"`
	Worker string `json:"worker"`
	ModRev int64  `json:"-"`
}

// foReadBounds reads every bound key under prefix in one revision, by
// worker (the key's name).
func foReadBounds(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]foBound, int64, error) {
	kp := ha.Keys{Prefix: prefix}.BoundPrefix()
	resp, err := cli.Get(ctx, kp, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("read %s*: %w", kp, err)
	}
	out := make(map[string]foBound, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var b foBound
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return nil, 0, fmt.Errorf("%s: %w: %s", kv.Key, err, kv.Value)
		}
		b.ModRev = kv.ModRevision
		out[strings.TrimPrefix(string(kv.Key), kp)] = b
	}
	return out, resp.Header.Revision, nil
}

// bounds reads the bound keys, by worker.
func (f *foFleet) bounds() map[string]foBound {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Second)
	defer cancel()
	b, _, err := foReadBounds(ctx, f.c.direct, f.c.prefix)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// sourceWorkers maps each bound source to its worker.
func (f *foFleet) sourceWorkers() map[string]string {
	out := map[string]string{}
	for w, b := range f.bounds() {
		out[b.Source] = w
	}
	return out
}

// waitBound waits up to d until every source in sources is bound to an
// alive worker, one each, and returns source → worker.
func (f *foFleet) waitBound(d time.Duration, sources ...string) map[string]string {
	f.t.Helper()
	var out map[string]string
	testutil.Eventually(f.t, d, fmt.Sprintf("the scheduler binds %v to alive workers", sources), func() error {
		out = f.sourceWorkers()
		alive := f.alive()
		for _, s := range sources {
			if w, ok := out[s]; !ok || !alive[w] {
				return fmt.Errorf("bindings %v, alive %v", f.bounds(), alive)
			}
		}
		return nil
	})
	return out
}

// alive reports which workers have a keepalive key.
func (f *foFleet) alive() map[string]bool {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Second)
	defer cancel()
	kp := ha.Keys{Prefix: f.c.prefix}.KeepalivePrefix()
	resp, err := f.c.direct.Get(ctx, kp, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), kp)] = true
	}
	return out
}

// waitAlive waits up to d until every worker in names has a keepalive key.
func (f *foFleet) waitAlive(d time.Duration, names ...string) {
	f.t.Helper()
	testutil.Eventually(f.t, d, fmt.Sprintf("workers %v are alive", names), func() error {
		alive := f.alive()
		for _, n := range names {
			if !alive[n] {
				return fmt.Errorf("alive: %v", alive)
			}
		}
		return nil
	})
}

// leader is the scheduler leader per etcd: the value of the oldest key
// under P/scheduler/leader/ (concurrency.Election); "" when none.
func (f *foFleet) leader() string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 5*time.Second)
	defer cancel()
	resp, err := f.c.direct.Get(ctx, f.c.prefix+"/scheduler/leader/", clientv3.WithFirstCreate()...)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// waitLeader waits up to d until etcd names a leader that is not in
// excluded and returns it with the moment it was seen.
func (f *foFleet) waitLeader(d time.Duration, excluded ...string) (string, time.Time) {
	f.t.Helper()
	var l string
	testutil.Eventually(f.t, d, fmt.Sprintf("a scheduler leader other than %v", excluded), func() error {
		l = f.leader()
		for _, x := range append(excluded, "") {
			if l == x {
				return fmt.Errorf("leader %q", l)
			}
		}
		return nil
	})
	return l, time.Now()
}

// foSchedDoc is the scheduler object of a worker's status.
type foSchedDoc struct {
	Leader   string            `json:"leader"`
	IsLeader bool              `json:"is-leader"`
	Sources  map[string]string `json:"sources"`
	Moves    int               `json:"moves"`
}

// sched reads the scheduler object of the worker's status; an error when
// the worker does not answer or the status has none.
func (w *foWorker) sched() (foSchedDoc, error) {
	var doc struct {
		Scheduler *foSchedDoc `json:"scheduler"`
	}
	r, err := httpDo(http.MethodGet, w.proc.url("/api/v1/status"), "")
	if err != nil {
		return foSchedDoc{}, err
	}
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil || doc.Scheduler == nil {
		return foSchedDoc{}, fmt.Errorf("GET /api/v1/status of %s: %d, no scheduler object (%v): %s", w.name, r.code, err, r.body)
	}
	return *doc.Scheduler, nil
}

// checkSchedStatus waits up to d until the status of every alive worker
// names etcd's leader, only the leader says is-leader, and the leader's
// sources are etcd's bindings.
func (f *foFleet) checkSchedStatus(d time.Duration) {
	f.t.Helper()
	testutil.Eventually(f.t, d, "every worker's status shows etcd's scheduler leader and the leader's view shows etcd's bindings", func() error {
		leader, alive, bound := f.leader(), f.alive(), f.sourceWorkers()
		for _, w := range f.workers {
			if !alive[w.name] {
				continue
			}
			s, err := w.sched()
			if err != nil {
				return err
			}
			if s.Leader != leader || s.IsLeader != (w.name == leader) {
				return fmt.Errorf("%s: scheduler %+v; etcd's leader is %q", w.name, s, leader)
			}
			if w.name == leader && !foSameBindings(s.Sources, bound) {
				return fmt.Errorf("leader %s: sources %v; etcd's bindings %v", w.name, s.Sources, bound)
			}
		}
		return nil
	})
}

// foSameBindings compares a leader's sources with etcd's (source →
// worker); an unbound source may be listed with "".
func foSameBindings(view, etcd map[string]string) bool {
	for s, w := range view {
		if w != etcd[s] {
			return false
		}
	}
	for s, w := range etcd {
		if view[s] != w {
			return false
		}
	}
	return true
}
