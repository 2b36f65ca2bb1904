package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/natstest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/tests/typestest"
)

// Issue 15's acceptance: a fleet of three dm-worker processes started with
// --scheduler on one etcd keeps every source bound to an alive worker by
// itself. Workers are killed with SIGKILL or cut off etcd (a TCP proxy of
// their own in front of etcd); the tests measure how long the failover
// takes, watch the bound keys for the whole test (no source is ever bound
// to two workers), and compare the target with the source after each
// failover.

// foKills is how many workers TestFailoverKill9 kills.
const foKills = 5

// TestFailoverKill9 runs two sources, each with an incremental task into
// its own schema of one target, on three workers. The scheduler binds both
// sources; then, five times, while workloads run, the worker of a source
// (the scheduler leader when it is bound, every other round) is killed
// with SIGKILL: its source must be bound to the free worker within
// keepalive-ttl + 2 s, the subtask must sync there, and after the
// workloads both targets must equal their sources. The killed worker comes
// back unbound.
func TestFailoverKill9(t *testing.T) {
	f := foStartFleet(t, 3)
	m := f.monitor()
	tgt := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-target", FastCommit: true})
	tgtDB := tgt.DB(t)
	srcs := []*foSource{foNewSource(t, f, "s1", tgt, tgtDB), foNewSource(t, f, "s2", tgt, tgtDB)}
	t.Logf("the scheduler bound %v", f.waitBound(foBudget, "s1", "s2"))
	for _, s := range srcs {
		s.startTask(f)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("victims and moments: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 15))
	var took []time.Duration
	for round := range foKills {
		took = append(took, foKillRound(t, f, m, srcs, rng, round))
	}
	t.Logf("failover times (kill -9 to the new binding in etcd): %v", took)
	f.checkSchedStatus(10 * time.Second)
	m.check()
}

// foKillRound is one round of TestFailoverKill9 and returns how long the
// source took to move.
func foKillRound(t *testing.T, f *foFleet, m *foMonitor, srcs []*foSource, rng *rand.Rand, round int) time.Duration {
	for _, s := range srcs {
		s.startWorkload(2)
	}
	time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
	before := f.bounds()
	leader := f.leader()
	victims := make([]string, 0, len(before))
	for w := range before {
		victims = append(victims, w)
	}
	slices.Sort(victims)
	victim := victims[rng.IntN(len(victims))]
	if _, bound := before[leader]; bound && round%2 == 0 {
		victim = leader
	}
	source := before[victim].Source
	t0 := f.kill(victim)
	to, at := m.waitMove(source, victim, t0, foBudget+15*time.Second)
	took := at.Sub(t0)
	t.Logf("round %d: killed %s (leader %s) bound to %s; %s bound to %s %s later", round+1, victim, leader, source,
		source, to, took.Round(time.Millisecond))
	if took > foBudget {
		t.Errorf("round %d: %s moved %s after the kill of %s, want within keepalive-ttl + 2s = %s", round+1, source, took, victim, foBudget)
	}
	if victim == leader {
		nl, _ := f.waitLeader(foBudget, victim)
		t.Logf("round %d: new scheduler leader %s", round+1, nl)
	}
	// The binding of the other source was not touched.
	after := f.bounds()
	for w, b := range before {
		if w != victim && after[w] != b {
			t.Errorf("round %d: binding of alive worker %s changed from %+v to %+v", round+1, w, b, after[w])
		}
	}
	for _, s := range srcs {
		w := f.worker(f.sourceWorkers()[s.id])
		// The moved subtask must apply changes on its new worker, not
		// only start.
		d := waitSubtask(t, w.proc, s.task, 30*time.Second, fmt.Sprintf("%s syncs transactions on %s", s.task, w.name), func(d subtaskDoc) bool {
			return d.syncing() && d.Progress.Transactions > 0
		})
		if s.id == source {
			t.Logf("round %d: %s resumed on %s: %v", round+1, s.task, w.name, d)
		}
	}
	for _, s := range srcs {
		s.wl.waitCommits(t, 30*time.Second, s.wl.commits.Load()+100)
		s.stopWorkload()
	}
	for _, s := range srcs {
		s.waitEqual(60 * time.Second)
	}
	f.restart(victim)
	foRequireUnbound(t, f, victim)
	return took
}

// foRequireUnbound requires that worker has no bound key and its status
// shows no source, for a second.
func foRequireUnbound(t *testing.T, f *foFleet, worker string) {
	t.Helper()
	testutil.Consistently(t, time.Second, worker+" is unbound", func() error {
		if b, ok := f.bounds()[worker]; ok {
			return fmt.Errorf("bound key %+v", b)
		}
		if st := f.worker(worker).proc.status(); st.Source != "" {
			return fmt.Errorf("status shows source %q", st.Source)
		}
		return nil
	})
}

// TestFailoverPartition cuts the worker of a syncing source off etcd (its
// proxy goes down) without killing it. Proof of who writes to the target:
// the TCP connections each worker process holds to the target's port (from
// /proc, every 50 ms); a process without a connection to the target cannot
// write to it. The cut-off worker must drop its connections within its TTL
// (its data plane is killed on lease loss), before the new worker holds
// one; the source moves; once the proxy is back the old worker registers
// again, stays unbound and never connects to the target again while the
// task's checkpoint row keeps advancing (the new worker's writes).
func TestFailoverPartition(t *testing.T) {
	f := foStartFleet(t, 3)
	m := f.monitor()
	tgt := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-part-target", FastCommit: true})
	s := foNewSource(t, f, "s1", tgt, tgt.DB(t))
	old := f.waitBound(foBudget, "s1")["s1"]
	s.startTask(f)
	s.startWorkload(2)
	ow := f.worker(old)
	waitSubtask(t, ow.proc, s.task, 30*time.Second, "syncs on "+old, func(d subtaskDoc) bool { return d.syncing() && d.Progress.Transactions > 50 })
	cw := f.watchConns(tgt.Port())
	testutil.Eventually(t, 5*time.Second, old+" holds connections to the target (the proof sees the writer)", func() error {
		if n := cw.last().conns[old]; n == 0 {
			return fmt.Errorf("%s holds %d", old, n)
		}
		return nil
	})
	cp, err := s.checkpoint()
	t.Logf("before the cut: %s writes, checkpoint %s (%v), connections %v; leader %s", old, cp, err, cw.last().conns, f.leader())

	t0 := time.Now()
	ow.proxy.Down()
	to, at := m.waitMove("s1", old, t0, foBudget+15*time.Second)
	t.Logf("s1 bound to %s %s after %s was cut off etcd", to, at.Sub(t0).Round(time.Millisecond), old)
	if at.Sub(t0) > foBudget {
		t.Errorf("s1 moved %s after the cut, want within %s", at.Sub(t0), foBudget)
	}
	waitSubtask(t, f.worker(to).proc, s.task, 30*time.Second, "syncs on "+to, subtaskDoc.syncing)
	if e, ok := foFindLog(t, ow.proc.logFile, "keepalive lease lost", nil); ok {
		t.Logf("%s logged the lease loss %s after the cut: %s", old, e.at.Sub(t0).Round(time.Millisecond), e.raw)
	} else {
		t.Errorf("%s did not log the loss of its lease", old)
	}
	cp, err = s.checkpoint()
	t.Logf("cut off: checkpoint %s (%v), connections %v", cp, err, cw.last().conns)

	t1 := time.Now()
	ow.proxy.Up(t)
	f.waitAlive(15*time.Second, old)
	t.Logf("%s registered again %s after the proxy came back", old, time.Since(t1).Round(time.Millisecond))
	foRequireUnbound(t, f, old)
	f.checkSchedStatus(10 * time.Second)
	cpHeal, _ := s.checkpoint()
	s.wl.waitCommits(t, 30*time.Second, s.wl.commits.Load()+300)
	testutil.Eventually(t, 10*time.Second, "the checkpoint row advances after the heal", func() error {
		if cp, err := s.checkpoint(); err != nil || cp == cpHeal {
			return fmt.Errorf("checkpoint %s (%v)", cp, err)
		}
		return nil
	})
	s.stopWorkload()
	s.waitEqual(60 * time.Second)
	cp, _ = s.checkpoint()
	t.Logf("after the heal: checkpoint %s -> %s", cpHeal, cp)
	cw.stop()
	foCheckWriters(t, cw, old, to, t0)
	m.check()
}

// foCheckWriters checks the connection samples of the partition test:
// old drops its connections to the target within keepalive-ttl + 1 s of
// the cut at t0 and never holds one again; no sample shows old and to
// connected at once; to holds connections after the cut.
func foCheckWriters(t *testing.T, cw *foConnWatch, old, to string, t0 time.Time) {
	t.Helper()
	samples, errs := cw.all()
	for _, err := range errs[:min(3, len(errs))] {
		t.Errorf("reading connections: %v", err)
	}
	var zeroAt, newAt time.Time
	for _, s := range samples {
		if s.conns[to] > 0 && newAt.IsZero() && !s.at.Before(t0) {
			newAt = s.at
		}
		if s.at.Before(t0) {
			continue
		}
		if s.conns[old] > 0 && s.conns[to] > 0 {
			t.Errorf("%s: %s still holds %d connections to the target while %s holds %d", s.at.Format("15:04:05.000"), old, s.conns[old], to, s.conns[to])
		}
		if s.conns[old] == 0 && zeroAt.IsZero() {
			zeroAt = s.at
		}
		if s.conns[old] > 0 && !zeroAt.IsZero() {
			t.Errorf("%s: %s holds %d connections to the target again (%s after the cut)", s.at.Format("15:04:05.000"), old, s.conns[old], s.at.Sub(t0))
		}
	}
	if zeroAt.IsZero() {
		t.Fatalf("%s never dropped its connections to the target after the cut (%d samples)", old, len(samples))
	}
	t.Logf("%s held no connection to the target %s after the cut; %s connected %s after the cut (%d samples in all)", old,
		zeroAt.Sub(t0).Round(time.Millisecond), to, newAt.Sub(t0).Round(time.Millisecond), len(samples))
	if zeroAt.Sub(t0) > foTTL+time.Second {
		t.Errorf("%s kept its connections to the target %s after the cut, want within its TTL %s (+1s)", old, zeroAt.Sub(t0), foTTL)
	}
	if newAt.IsZero() {
		t.Errorf("%s never held a connection to the target after the cut: the proof sees no writer", to)
	}
}

// TestFailoverStream runs a NATS stream task on the source's worker and
// kills that worker while a workload writes: the stream goes on on the
// worker the source moves to, from P/stream/checkpoint (the new worker's
// log names that location), every change reaches NATS at least once (the
// events applied to empty copies reproduce the source) and NATS holds each
// event once (message dedup by the event's id).
func TestFailoverStream(t *testing.T) {
	f := foStartFleet(t, 3)
	m := f.monitor()
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-stream-source", Binlog: true, FastCommit: true})
	cp := mariadbtest.Start(t, mariadbtest.Options{Name: "fo-stream-copy", FastCommit: true})
	src.Exec(t, "CREATE DATABASE "+crashDB)
	for _, tb := range crashTables {
		src.Exec(t, tb.ddl)
	}
	src.Exec(t, typestest.DDL(crashDB))
	ns := natstest.Start(t)
	f.putSource(foSourceYAML(replSource, src.Port()))
	old := f.waitBound(foBudget, replSource)[replSource]
	r := &replication{t: t, c: f.c, src: src, tgt: cp, srcDB: src.DB(t), tgtDB: cp.DB(t), w: f.worker(old).proc}
	e := &streamEnv{replication: r, copyDB: copyPool(t, cp)}
	e.createStream("fo-nats", natsSink(ns.URL(), "cdc.fo"), false)
	e.waitStream("fo-nats", 30*time.Second, "streaming on "+old, streamDoc.streaming)
	e.writeTypes()
	wl := startWorkload(t, e.srcDB, 2)
	wl.waitCommits(t, 30*time.Second, 300)
	e.waitStream("fo-nats", 30*time.Second, "events delivered", func(d streamDoc) bool { return d.streaming() && d.Events > 100 })
	// Kill once the checkpoint in etcd is past the workload's start, so the
	// new worker does not simply start over.
	first := foStreamCheckpoint(t, f, "fo-nats")
	testutil.Eventually(t, 10*time.Second, "P/stream/checkpoint advances while the workload runs", func() error {
		if cp := foStreamCheckpoint(t, f, "fo-nats"); cp.BinlogName == first.BinlogName && cp.BinlogPos == first.BinlogPos {
			return fmt.Errorf("checkpoint %+v", cp)
		}
		return nil
	})

	t0 := f.kill(old)
	// Nothing writes the checkpoint now: the killed worker is gone and no
	// other has the source yet.
	saved := foStreamCheckpoint(t, f, "fo-nats")
	to, at := m.waitMove(replSource, old, t0, foBudget+15*time.Second)
	t.Logf("killed %s; %s bound to %s %s later; saved checkpoint %+v", old, replSource, to, at.Sub(t0).Round(time.Millisecond), saved)
	if at.Sub(t0) > foBudget {
		t.Errorf("%s moved %s after the kill, want within %s", replSource, at.Sub(t0), foBudget)
	}
	e.w = f.worker(to).proc
	e.waitStream("fo-nats", 30*time.Second, "streaming on "+to, streamDoc.streaming)
	want := fmt.Sprintf("%s:%d", saved.BinlogName, saved.BinlogPos)
	// The state turns streaming just before the reader logs where it starts.
	var l foLogEntry
	testutil.Eventually(t, 5*time.Second, to+" logs where fo-nats reads the binlog from", func() error {
		var ok bool
		if l, ok = foFindLog(t, e.w.logFile, "stream reads binlog", map[string]string{"stream": "fo-nats"}); !ok {
			return fmt.Errorf("no \"stream reads binlog\" of fo-nats in %s's log", to)
		}
		return nil
	})
	if l.fields["from"] != want {
		t.Errorf("fo-nats on %s reads the binlog from %v, want %s, the location in P/stream/checkpoint: %s", to, l.fields["from"], want, l.raw)
	}
	wl.waitCommits(t, 30*time.Second, wl.commits.Load()+300)
	if err := wl.stop(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload stopped: %s", wl)
	e.waitCaughtUp(time.Minute, "fo-nats")
	e.verifyApplied("nats", e.readNATS(ns, "cdc.fo"))
	f.restart(old)
	foRequireUnbound(t, f, old)
	m.check()
}

// TestFailoverLeader kills the scheduler leader twice while nothing else
// changes: first when it is unbound (a source it held is moved away with
// `dmctl source transfer` first): a new leader within keepalive-ttl + 2 s
// and no bound key changes at all (same mod revisions); then, the old
// leader restarted, the new leader, which is bound: its source moves to
// the free worker and the other binding keeps its mod revision.
func TestFailoverLeader(t *testing.T) {
	f := foStartFleet(t, 3)
	m := f.monitor()
	// The sources' servers do not matter here, only their bindings.
	f.putSource("source-id: s1\nfrom: {host: 127.0.0.1, port: 1, user: root, password: \"\"}\n")
	f.putSource("source-id: s2\nfrom: {host: 127.0.0.1, port: 1, user: root, password: \"\"}\n")
	bound := f.waitBound(foBudget, "s1", "s2")
	leader := f.leader()
	f.checkSchedStatus(10 * time.Second)
	foCheckWorkerList(t, f, leader)
	if b, ok := f.bounds()[leader]; ok {
		free := ""
		for _, w := range f.workers {
			if _, ok := f.bounds()[w.name]; !ok {
				free = w.name
			}
		}
		res := f.c.ok("source", "transfer", b.Source, free)
		t.Logf("leader %s held %s: dmctl source transfer %s %s: %s", leader, b.Source, b.Source, free, res.stdout)
		f.waitBound(5*time.Second, "s1", "s2")
	}
	t.Logf("bindings at first %v; now %v, leader %s", bound, f.sourceWorkers(), leader)
	foKillLeader(t, f, m, leader)
	f.restart(leader)
	foRequireUnbound(t, f, leader)
	foKillLeader(t, f, m, f.leader())
	m.check()
}

// foKillLeader kills the scheduler leader and checks that a new one is
// elected within the budget and that only the leader's own binding (if it
// had one) changed.
func foKillLeader(t *testing.T, f *foFleet, m *foMonitor, leader string) {
	t.Helper()
	before := f.bounds()
	t0 := f.kill(leader)
	nl, at := f.waitLeader(foBudget+15*time.Second, leader)
	t.Logf("killed leader %s (bound %+v): %s leads %s later", leader, before[leader], nl, at.Sub(t0).Round(time.Millisecond))
	if at.Sub(t0) > foBudget {
		t.Errorf("new leader %s %s after the kill of %s, want within %s", nl, at.Sub(t0), leader, foBudget)
	}
	if b, ok := before[leader]; ok {
		to, at := m.waitMove(b.Source, leader, t0, foBudget+15*time.Second)
		t.Logf("%s, needed elsewhere, bound to %s %s after the kill", b.Source, to, at.Sub(t0).Round(time.Millisecond))
		if at.Sub(t0) > foBudget {
			t.Errorf("%s moved %s after the kill of %s, want within %s", b.Source, at.Sub(t0), leader, foBudget)
		}
	}
	f.checkSchedStatus(10 * time.Second)
	testutil.Consistently(t, 2*time.Second, "the bindings of alive workers keep their mod revisions", func() error {
		after := f.bounds()
		for w, b := range before {
			if w != leader && after[w] != b {
				return fmt.Errorf("binding of %s: %+v, then %+v", w, b, after[w])
			}
		}
		if n := len(after) - len(before); n != 0 && before[leader] == (foBound{}) {
			return fmt.Errorf("bindings %v, then %v, though the leader was unbound", before, after)
		}
		return nil
	})
}
