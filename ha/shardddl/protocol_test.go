package shardddl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// executions records which member ran which DDL on the "target", in order.
type executions struct {
	mu  sync.Mutex
	ran []string // "ddl by member"
}

func (e *executions) add(ddl string, m Member) {
	e.mu.Lock()
	e.ran = append(e.ran, ddl+" by "+m.String())
	e.mu.Unlock()
}

func (e *executions) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ran)
}

// runMember acts as the sync unit of one upstream table: for each DDL in
// turn it reports, waits, and executes or skips as its role says. Each DDL
// uses a new Coordinator (a different worker object each time).
func runMember(ctx context.Context, cli *clientv3.Client, source string, table Table, ddls []string, ex *executions) error {
	for i, ddl := range ddls {
		c, err := New(cli, "", testTask, source, nil)
		if err != nil {
			return err
		}
		st, err := c.Report(ctx, Report{Target: target, Table: table, DDLs: []string{ddl},
			Location: Location{Name: "bin.000001", Pos: uint32(100 * (i + 1))}})
		if err != nil {
			return fmt.Errorf("report %s: %w", ddl, err)
		}
		for st.Role != RoleResolved {
			switch st.Role {
			case RoleOwner:
				if st, err = c.Begin(ctx, target, table); err != nil {
					return err
				}
			case RoleOwnerPending:
				ex.add(st.DDLs[0], c.member(table))
				if st, err = c.Done(ctx, target, table); err != nil {
					return err
				}
			case RoleSkip:
				if st, err = c.Ack(ctx, target, table); err != nil {
					return err
				}
			case RoleWaiting:
				if st, err = c.Wait(ctx, target, table, RoleWaiting); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%s %s: unexpected state %+v", source, table, st)
			}
		}
		if st.Seq != int64(i+1) {
			return fmt.Errorf("%s %s: DDL %q resolved at seq %d, want %d", source, table, ddl, st.Seq, i+1)
		}
	}
	return nil
}

// eightTables are 2 sources x 2 schemas x 2 tables.
func eightTables() map[string][]Table {
	out := map[string][]Table{}
	for _, src := range []string{"s1", "s2"} {
		for _, db := range []string{"shop_01", "shop_02"} {
			for _, tb := range []string{"orders_00", "orders_01"} {
				out[src] = append(out[src], tbl(db, tb))
			}
		}
	}
	return out
}

// countDecisions watches the lock key from rev and counts its creations
// until stop is closed.
func countDecisions(ctx context.Context, cli *clientv3.Client, rev int64, stop <-chan struct{}, n *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := cli.Watch(wctx, newKeys("").lock(testTask, target), clientv3.WithRev(rev))
	for {
		select {
		case <-stop:
			return
		case resp, ok := <-ch:
			if !ok {
				return
			}
			for _, ev := range resp.Events {
				if ev.IsCreate() {
					n.Add(1)
				}
			}
		}
	}
}

func runMerge(t *testing.T, ddls []string) {
	ctx := testCtx(t)
	cli := newClient(t)
	groups := eightTables()
	for src, tables := range groups {
		mustPutShare(ctx, t, coord(t, cli, src), tables...)
	}
	start, err := cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	var decisions atomic.Int64
	stop := make(chan struct{})
	var watchWG sync.WaitGroup
	watchWG.Add(1)
	go countDecisions(ctx, cli, start.Header.Revision+1, stop, &decisions, &watchWG)

	ex := &executions{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	// Racing deciders: workers that only look at the lock.
	rctx, rcancel := context.WithCancel(ctx)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := New(cli, "", testTask, "s1", nil)
			if err != nil {
				errs <- err
				return
			}
			for rctx.Err() == nil {
				if _, err := c.State(rctx, target, groups["s1"][i]); err != nil && rctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	var members sync.WaitGroup
	for src, tables := range groups {
		for _, table := range tables {
			members.Add(1)
			go func() {
				defer members.Done()
				time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
				if err := runMember(ctx, cli, src, table, ddls, ex); err != nil {
					errs <- err
				}
			}()
		}
	}
	members.Wait()
	rcancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	ran := ex.list()
	if len(ran) != len(ddls) {
		t.Fatalf("executions %v, want each of %v exactly once", ran, ddls)
	}
	for i, ddl := range ddls { // in order
		if got := ran[i]; len(got) < len(ddl) || got[:len(ddl)] != ddl {
			t.Fatalf("execution %d is %q, want %q first (all: %v)", i, got, ddl, ran)
		}
	}
	if lockKeyExists(ctx, t, cli) {
		t.Fatal("the lock key is left after every member acknowledged")
	}
	// Every info is resolved: one executed, the others skipped, at the last seq.
	var executed, skipped int
	for src, tables := range groups {
		c := coord(t, cli, src)
		for _, table := range tables {
			st := state(ctx, t, c, table)
			wantRole(t, "after the merge", st, RoleResolved)
			if st.Seq != int64(len(ddls)) {
				t.Errorf("%s %s at seq %d, want %d", src, table, st.Seq, len(ddls))
			}
			switch st.Resolved {
			case ResolvedExecuted:
				executed++
			case ResolvedSkipped:
				skipped++
			}
		}
	}
	if executed != 1 || skipped != 7 {
		t.Errorf("last DDL: %d executed and %d skipped, want 1 and 7", executed, skipped)
	}
	testutilWait(t, func() bool { return decisions.Load() == int64(len(ddls)) },
		func() string { return fmt.Sprintf("%d lock decisions, want %d", decisions.Load(), len(ddls)) })
	close(stop)
	watchWG.Wait()
	if locks, err := Locks(ctx, cli, "", testTask); err != nil || len(locks) != 0 {
		t.Fatalf("Locks after the merge: %v, %v; want none", locks, err)
	}
}

func testutilWait(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Eight member tables reach the same DDL in random order from concurrent
// workers while other workers race to decide: one decision, one executor,
// seven skips, and the lock key is gone at the end.
func TestEightTablesOneDecisionOneExecutor(t *testing.T) {
	runMerge(t, []string{"ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT"})
}

// Back-to-back DDLs on every shard are successive locks, resolved in order.
func TestBackToBackDDLsResolveInOrder(t *testing.T) {
	runMerge(t, []string{
		"ALTER TABLE `shop`.`orders` ADD COLUMN c1 INT",
		"ALTER TABLE `shop`.`orders` ADD COLUMN c2 INT",
		"ALTER TABLE `shop`.`orders` ADD INDEX i1 (c1)",
	})
}
