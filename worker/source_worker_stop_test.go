package worker

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit"
)

// workerGoroutines lists the goroutines that run code of this package or
// were started by it, other than the tests themselves. goleak checks the
// whole process at the end of the package (TestMain); this checks one
// test's source worker while the embedded etcd it talks to still runs.
func workerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "dm-worker/worker.") && !strings.Contains(g, "dm-worker/worker.Test") &&
			!strings.Contains(g, "dm-worker/worker.workerGoroutines") {
			out = append(out, g)
		}
	}
	return out
}

// A reconcile that is building a subtask and another building the relay
// holder when Close runs: Close seals the subtask set and the relay, so
// what they built is refused and closed again by the reconciles
// themselves; Close sweeps once, returns only after them, and leaves
// nothing running. Before, the sets accepted work after the sweep and
// Close swept a second time for it.
func TestSourceWorkerStopRacesReconcile(t *testing.T) {
	relays := &fakeRelays{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	release := make(chan struct{})
	building := make(chan struct{}, 1)
	e := startSWWith(t, 2, func(c *SourceWorkerConfig) {
		c.NewRelay = relays.factory
		c.Factory.(*swFactory).wrap = func(u *testUnit) unit.Unit {
			building <- struct{}{}
			<-release
			return u
		}
	})
	e.sw.EnableRelay(e.ctx())
	re := &relayEnv{swEnv: e, relays: relays}
	e.putTask("t1", stage.Running)
	re.putRelay(stage.Running)
	for what, ch := range map[string]chan struct{}{"subtask": building, "relay": relays.entered} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no reconcile is building the %s", what)
		}
	}

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.sw.Close()
	}()
	// Close waits for the reconciles, which wait for the test.
	if returned(closed, 100*time.Millisecond) {
		t.Fatal("Close returned while reconciles still run")
	}
	close(release)
	close(relays.hold)
	if !returned(closed, 10*time.Second) {
		t.Fatal("Close still waits after the reconciles were released")
	}

	if st := e.sw.SubTask("t1"); st != nil {
		t.Fatalf("subtask t1 kept after Close, %s", st.Stage())
	}
	if h := e.sw.Relay(); h != nil {
		t.Fatalf("relay holder kept after Close, %s", h.Stage())
	}
	u := e.factory.latest("t1")
	if u == nil || u.State() != usClosed || u.count("Process") != 0 {
		t.Fatalf("the unit built during Close: %v; want it closed without running", u)
	}
	built := relays.built()
	if len(built) != 1 || built[0].Stage() != stage.Stopped || built[0].runCount() != 0 {
		t.Fatalf("relay holders built during Close: %d; want one, Stopped without pulling", len(built))
	}
	testutil.Eventually(t, 5*time.Second, "no goroutine of the source worker left", func() error {
		if gs := workerGoroutines(); len(gs) > 0 {
			return fmt.Errorf("%d left, the first:\n%s", len(gs), gs[0])
		}
		return nil
	})
}

// takeAll seals a set: put refuses from then on, so the caller closes
// what it built.
func TestLocalSetSealedByTakeAll(t *testing.T) {
	l := newLocalSet[int](RealClock{}, "subtask")
	if err := l.put("a", 1); err != nil {
		t.Fatal(err)
	}
	if got := l.takeAll(); len(got) != 1 || got["a"] != 1 {
		t.Fatalf("takeAll = %v", got)
	}
	err := l.put("b", 2)
	if !errors.Is(err, errSealed) || !strings.Contains(err.Error(), `subtask "b"`) {
		t.Fatalf("put after takeAll: %v, want %v naming the subtask", err, errSealed)
	}
	if _, ok := l.get("b"); ok || len(l.values()) != 0 {
		t.Fatal("a sealed set took an object")
	}
}
