package shardddl

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/shardschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/etcdtest"
)

// fakeTarget is the target table as the owners change it: a schema the
// statements of each change move from its From to its To. Running a
// statement whose effect the target already has is running it twice.
type fakeTarget struct {
	mu     sync.Mutex
	schema *sqlschema.Table // guarded by mu
	ran    []string         // guarded by mu
	errs   []string         // guarded by mu
}

func (f *fakeTarget) run(st OptState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	changes, err := shardschema.Diff(st.From, st.To, target.Schema, target.Name)
	if err != nil {
		f.errs = append(f.errs, err.Error())
		return
	}
	for _, c := range changes {
		if c.AppliedTo(f.schema) {
			f.errs = append(f.errs, fmt.Sprintf("change %d: %s ran twice", st.Version, c.SQL))
		}
		if !slices.Contains(st.Run, c.SQL) {
			f.errs = append(f.errs, fmt.Sprintf("change %d: %s is not among the statements %q", st.Version, c.SQL, st.Run))
		}
	}
	f.ran = append(f.ran, st.Run...)
	f.schema = st.To
}

func (f *fakeTarget) now() *sqlschema.Table {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.schema
}

// Workers of three sources (each its own etcd client), two tables each,
// run ADD COLUMN c, ADD COLUMN d, DROP COLUMN c on every table at once.
// The target gets each of the three changes exactly once, in order, even
// though the owner of one change is killed after running it and before
// DoneOptimistic (its successor checks the target and runs nothing).
func TestOptimisticConcurrentWorkers(t *testing.T) {
	ctx := testCtx(t)
	srv := etcdtest.Start(t)
	onlyD := model(t, "id int(11) not null", "a int(11)", "d int(11)")
	steps := []struct {
		ddl           string
		before, after *sqlschema.Table
	}{{optAddC, baseModel(t), withC(t)}, {optAddD, withC(t), withCD(t)}, {optDropC, withCD(t), onlyD}}
	sources := []string{"s1", "s2", "s3"}
	tables := []Table{tA, tB}
	for _, s := range sources {
		optShare(ctx, t, coord(t, srv.Client(t), s), baseModel(t), tables...)
	}
	ft := &fakeTarget{schema: baseModel(t)}
	// A spare connection per source for the worker that replaces a killed
	// one (made here: a test helper may not fail from another goroutine).
	spare := map[string]*clientv3.Client{}
	for _, s := range sources {
		spare[s] = srv.Client(t)
	}
	var killed atomic.Bool
	// Every table finishes a step before any reports the next: with a
	// table still at the base schema while the others dropped c, the
	// joined schema rightly loses c and gets it back (five statements,
	// not three), which is DM's optimistic semantics, not a double run.
	barrier := make([]*sync.WaitGroup, len(steps))
	for i := range barrier {
		barrier[i] = &sync.WaitGroup{}
		barrier[i].Add(len(sources) * len(tables))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(sources)*len(tables))
	for _, s := range sources {
		c := coord(t, srv.Client(t), s)
		for _, tb := range tables {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := optWorker(ctx, spare[s], c, tb, steps, ft, &killed, barrier); err != nil {
					errs <- fmt.Errorf("%s %s: %w", s, tb, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, e := range ft.errs {
		t.Error(e)
	}
	if want := []string{runAddC, runAddD, runDropC}; !slices.Equal(ft.ran, want) {
		t.Errorf("statements run on the target\n got %q\nwant %q", ft.ran, want)
	}
	if !shardschema.Equal(ft.schema, onlyD) {
		t.Errorf("target ends %+v, want id, a, d", ft.schema)
	}
	if !killed.Load() {
		t.Error("no owner was killed between Begin and Done")
	}
	if locks := optLocks(ctx, t, coord(t, srv.Client(t), "s1")); len(locks) != 0 {
		t.Errorf("locks at the end: %+v", locks)
	}
}

// optWorker runs one table's DDLs as the sync unit would: report, wait
// while waiting, run the change it owns.
func optWorker(ctx context.Context, spare *clientv3.Client, c *Coordinator, tb Table,
	steps []struct {
		ddl           string
		before, after *sqlschema.Table
	}, ft *fakeTarget, killed *atomic.Bool, barrier []*sync.WaitGroup) error {
	passed := 0
	defer func() { // a worker that fails lets the others past its steps
		for ; passed < len(barrier); passed++ {
			barrier[passed].Done()
		}
	}()
	for i, s := range steps {
		if i > 0 {
			barrier[i-1].Wait()
		}
		r := OptReport{Target: target, Table: tb, DDLs: []string{s.ddl}, Before: s.before, After: s.after,
			Location: Location{Name: "mariadb-bin.000001", Pos: uint32(100 * (i + 1))}}
		st, err := c.ReportOptimistic(ctx, r)
		if err != nil {
			return err
		}
		for st.Role != RoleResolved {
			switch st.Role {
			case RoleWaiting:
				states, err := c.WaitOptimistic(ctx, target, func(m map[Table]OptState) bool { return m[tb].Role != RoleWaiting })
				if err != nil {
					return err
				}
				st = states[tb]
			case RoleOwner:
				if _, err := c.BeginOptimistic(ctx, target, tb, st.Version); err != nil {
					return err
				}
				ft.run(st)
				if st.Version == 3 && killed.CompareAndSwap(false, true) {
					// kill -9 after the statements ran: a new worker on a
					// new connection replays the DDL from its checkpoint.
					if c, err = New(spare, "", testTask, c.source, nil); err != nil {
						return err
					}
					if st, err = c.ReportOptimistic(ctx, r); err != nil {
						return err
					}
					if st.Role != RoleOwnerPending {
						return fmt.Errorf("replay after a kill between Begin and Done: role %s", st.Role)
					}
					continue
				}
				if st, err = c.DoneOptimistic(ctx, target, tb, st.Version); err != nil {
					return err
				}
			case RoleOwnerPending:
				rest, err := shardschema.Remaining(st.From, st.To, ft.now(), target.Schema, target.Name)
				if err != nil {
					return err
				}
				if len(rest) > 0 {
					ft.run(st)
				}
				if st, err = c.DoneOptimistic(ctx, target, tb, st.Version); err != nil {
					return err
				}
			default:
				return fmt.Errorf("step %d (%s): unexpected state %+v", i, s.ddl, st)
			}
		}
		barrier[i].Done()
		passed++
	}
	return nil
}
