package shardddl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/backoff"
	"github.com/dmworker/dm-worker/pkg/shardschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// ErrMixedModes marks an optimistic step on a group that has pessimistic
// infos or a pessimistic lock, or the reverse: a task has one shard mode.
var ErrMixedModes = errors.New("shardddl: the sharding group is coordinated in the other shard mode")

// ShareOptimistic publishes this source's share of the group of target in
// optimistic mode: its upstream tables routed to the target, each with its
// current schema (as the sync unit's schema tracker has it). Call it when
// the subtask starts and whenever a routed table is created, renamed or
// dropped; an empty map removes the source from the group. A table that
// joins is decided like a report (its schema against the join: a column
// the others lack is added to the target, a conflicting one is a
// conflict); a table that leaves takes its schema out of the join, which
// may drop columns from the target that only it still had (a DROP COLUMN
// the other tables made before). A table already in the group keeps the
// schema the group has for it: its reports move it. It returns the states
// of the source's tables after that: one of them may own a target change
// (RoleOwner).
// Transactions guarded by the whole group: the new tables' keys (at most
// maxOptPutsPerTxn a step), then the share; the decisions follow in their
// own (optSettle).
func (c *Coordinator) ShareOptimistic(ctx context.Context, target Table, models map[Table]*sqlschema.Table) (map[Table]OptState, error) {
	tables := make([]Table, 0, len(models))
	for t, m := range models {
		if m == nil || len(m.Columns) == 0 {
			return nil, fmt.Errorf("shardddl: optimistic share of %s to lock %s has no schema for it", c.member(t), LockID(c.task, target))
		}
		tables = append(tables, t)
	}
	tables = sortTables(tables)
	// The keys of new tables first, at most maxOptPutsPerTxn a transaction
	// (etcd's --max-txn-ops): a key of a table its share does not list yet
	// counts for nothing, so each step leaves a valid group.
	for more := true; more; {
		err := step(ctx, c.cli, c.keys, c.task, target, "put the optimistic tables of source "+c.source, func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
			if err := g.checkOptimistic(); err != nil {
				return nil, nil, err
			}
			var ops []clientv3.Op
			more = false
			for _, t := range tables {
				m := c.member(t)
				if _, ok := g.optTables[m]; ok {
					continue
				}
				if len(ops) == maxOptPutsPerTxn {
					more = true
					break
				}
				ops = append(ops, mustJSONOp(g.optTableKey(m), OptTableValue{Report: &OptReportValue{After: models[t], State: OptNew}}))
			}
			return g.guards(), ops, nil
		})
		if err != nil {
			return nil, err
		}
	}
	for more := true; more; {
		err := step(ctx, c.cli, c.keys, c.task, target, "put the optimistic share of source "+c.source, func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
			if err := g.checkOptimistic(); err != nil {
				return nil, nil, err
			}
			ops, m, gone := c.shareOps(g, tables)
			more = m
			opt := c.optShareOps(g, tables, gone)
			if len(ops) == 0 && len(opt) == 0 {
				return nil, nil, nil
			}
			if len(ops) == 0 {
				ops = append(ops, g.bumpVersion("put optimistic share"))
			}
			return g.guards(), append(ops, opt...), nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c.StatesOptimistic(ctx, target)
}

// maxOptPutsPerTxn bounds the opt/table puts of one transaction (etcd's
// default --max-txn-ops is 128); bigger changes are written in steps.
const maxOptPutsPerTxn = 100

// optShareOps are the opt/ operations of a share (the new tables' keys are
// written before it): the removed tables' keys deleted (at most the
// maxDeletesPerTxn shareOps removes), a target change whose owner left
// handed to a member left, the joined schema deleted with the last table.
func (c *Coordinator) optShareOps(g *group, tables []Table, gone []Member) []clientv3.Op {
	var ops []clientv3.Op
	if len(tables) == 0 {
		for m := range g.optTables {
			if m.Source == c.source {
				ops = append(ops, clientv3.OpDelete(g.prefix+segOpt+"/table/"+c.source+"/", clientv3.WithPrefix()))
				break
			}
		}
	}
	var removed []Member
	for m := range g.optTables {
		if m.Source == c.source && !slices.Contains(tables, m.Table) {
			if len(tables) > 0 && !slices.Contains(gone, m) && g.isMember(m) {
				continue // left in the share by a partial step; removed by the next
			}
			removed = append(removed, m)
			if len(tables) > 0 {
				ops = append(ops, clientv3.OpDelete(g.optTableKey(m)))
			}
		}
	}
	if e := g.optExec; e != nil && slices.Contains(removed, e.v.Owner) {
		left := g.optMembersAfterShare(c.source, tables)
		if len(left) == 0 {
			ops = append(ops, clientv3.OpDelete(g.optExecKey()))
		} else {
			next := left[0]
			for _, m := range left {
				if m.Source == e.v.Owner.Source {
					next = m
					break
				}
			}
			v := e.v
			v.Owner = next
			c.lg.Info("optimistic target change handed to another member: its owner left the group",
				zap.String("lock", LockID(c.task, g.target)), zap.Stringer("owner", next), zap.Int64("version", v.Version))
			ops = append(ops, mustJSONOp(g.optExecKey(), v))
		}
	}
	if len(removed) > 0 && len(g.optMembersAfterShare(c.source, tables)) == 0 && g.optJoined != nil {
		// The group is empty: its joined schema goes with its last table.
		ops = append(ops, clientv3.OpDelete(g.optJoinedKey()))
	}
	return ops
}

// optMembersAfterShare are the members with an opt/ key once source's
// share is tables, sorted.
func (g *group) optMembersAfterShare(source string, tables []Table) []Member {
	var out []Member
	for m := range g.optTables {
		if (m.Source != source && g.isMember(m)) || (m.Source == source && slices.Contains(tables, m.Table)) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, Member.compare)
	return out
}

// checkOptimistic refuses a group coordinated in pessimistic mode.
func (g *group) checkOptimistic() error {
	if g.lock != nil || len(g.infos) > 0 || g.unlock != nil {
		return fmt.Errorf("%w: lock %s has pessimistic infos or a pessimistic lock; a task has one shard-mode",
			ErrMixedModes, LockID(g.task, g.target))
	}
	return nil
}

// ReportOptimistic records the DDL of an upstream table in optimistic mode
// and returns the table's state once every decision it allows is made
// (OptState says what the worker does). Reporting the same DDL at the same
// location with the same schemas again (a retry, a replay after a restart)
// writes nothing and returns the state; another DDL while the previous one
// is undecided or in conflict replaces it (task handle-error replace; a
// skip reports the DDL with After equal to Before). Refused while the
// table owns a target change it has not run (ErrWrongRole).
func (c *Coordinator) ReportOptimistic(ctx context.Context, r OptReport) (OptState, error) {
	m := c.member(r.Table)
	id := LockID(c.task, r.Target)
	switch {
	case len(r.DDLs) == 0:
		return OptState{}, fmt.Errorf("shardddl: optimistic report of %s to lock %s has no DDL", m, id)
	case r.Before == nil || r.After == nil:
		return OptState{}, fmt.Errorf("shardddl: optimistic report of %s to lock %s needs the table's schema before and after the DDL", m, id)
	}
	err := step(ctx, c.cli, c.keys, c.task, r.Target, "report the optimistic DDL of "+m.String(), func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		if err := g.checkOptimistic(); err != nil {
			return nil, nil, err
		}
		if !g.isMember(m) {
			return nil, nil, fmt.Errorf("%w: %s is not in the share of source %s of lock %s; ShareOptimistic first",
				ErrNotMember, m, c.source, id)
		}
		cur := g.optTables[m]
		next := OptReportValue{Seq: 1, DDLs: slices.Clone(r.DDLs), Location: r.Location, Before: r.Before,
			After: r.After, Strict: r.Strict, State: OptNew}
		if rep := cur.v.Report; rep != nil {
			switch {
			case sameReport(rep, next):
				return nil, nil, nil // a retry or a replay
			case rep.State == OptNew || rep.State == OptConflict:
				next.Seq = rep.Seq // replaces the undecided one
			default:
				next.Seq = rep.Seq + 1
			}
		}
		if e := g.optExec; e != nil && e.v.Owner == m {
			return nil, nil, fmt.Errorf("%w: %s owns the change of lock %s to version %d (%s); run it and call "+
				"DoneOptimistic before reporting its next DDL", ErrWrongRole, m, id, e.v.Version, quoteDDLs(e.v.DDLs))
		}
		v := cur.v
		v.Report = &next
		return g.guards(), []clientv3.Op{mustJSONOp(g.optTableKey(m), v)}, nil
	})
	if err != nil {
		return OptState{}, err
	}
	return c.StateOptimistic(ctx, r.Target, r.Table)
}

// sameReport: the same DDLs at the same location with the same schemas.
func sameReport(a *OptReportValue, b OptReportValue) bool {
	return slices.Equal(a.DDLs, b.DDLs) && a.Location == b.Location && a.Strict == b.Strict &&
		shardschema.Equal(a.Before, b.Before) && shardschema.Equal(a.After, b.After)
}

// BeginOptimistic records that the owner of the target change of version
// (OptState.Version) is about to run it. After it, the owner's state is
// RoleOwnerPending until DoneOptimistic.
func (c *Coordinator) BeginOptimistic(ctx context.Context, target, table Table, version int64) (OptState, error) {
	m := c.member(table)
	err := step(ctx, c.cli, c.keys, c.task, target, "begin the optimistic change of "+m.String(), func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		e := g.optExec
		if e == nil || e.v.Owner != m || e.v.Version != version {
			return nil, nil, g.optWrongRole(m, "begin", version)
		}
		if e.v.Executing {
			return nil, nil, nil
		}
		v := e.v
		v.Executing = true
		return []clientv3.Cmp{keyRev(e.key, e.rev)}, []clientv3.Op{mustJSONOp(e.key, v)}, nil
	})
	if err != nil {
		return OptState{}, err
	}
	return c.StateOptimistic(ctx, target, table)
}

// DoneOptimistic records that the owner ran the target change of version:
// the change is removed, the joined schema is the target's, and the
// members that waited for it go on. A retry after it succeeded changes
// nothing.
func (c *Coordinator) DoneOptimistic(ctx context.Context, target, table Table, version int64) (OptState, error) {
	m := c.member(table)
	err := step(ctx, c.cli, c.keys, c.task, target, "finish the optimistic change of "+m.String(), func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		e := g.optExec
		if e == nil || e.v.Version != version {
			if g.optJoined != nil && g.optJoined.v.Version >= version {
				return nil, nil, nil // done before: a retry
			}
			return nil, nil, g.optWrongRole(m, "finish", version)
		}
		if e.v.Owner != m {
			return nil, nil, g.optWrongRole(m, "finish", version)
		}
		ops := []clientv3.Op{clientv3.OpDelete(e.key)}
		if kv, ok := g.optTables[m]; ok && kv.v.Report != nil && kv.v.Report.Exec == version && kv.v.Report.State == OptApplied {
			v := kv.v
			r := *v.Report
			r.State = OptExecuted
			v.Report = &r
			ops = append(ops, mustJSONOp(kv.key, v))
		}
		c.lg.Info("optimistic target change done", zap.String("lock", LockID(c.task, target)),
			zap.Stringer("owner", m), zap.Int64("version", version), zap.Strings("ddls", e.v.DDLs))
		return []clientv3.Cmp{keyRev(e.key, e.rev)}, ops, nil
	})
	if err != nil {
		return OptState{}, err
	}
	return c.StateOptimistic(ctx, target, table)
}

func (g *group) optWrongRole(m Member, what string, version int64) error {
	have := "no target change is outstanding"
	if e := g.optExec; e != nil {
		have = fmt.Sprintf("the outstanding change is version %d, owned by %s", e.v.Version, e.v.Owner)
	}
	return fmt.Errorf("%w: %s cannot %s change %d of lock %s: %s", ErrWrongRole, m, what, version, LockID(g.task, g.target), have)
}

// StateOptimistic returns the state of the upstream table, making first
// every decision the group allows.
func (c *Coordinator) StateOptimistic(ctx context.Context, target, table Table) (OptState, error) {
	g, err := optSettle(ctx, c.cli, c.keys, c.lg, c.task, target, c.source)
	if err != nil {
		return OptState{}, err
	}
	return g.optState(c.member(table)), nil
}

// StatesOptimistic returns the states of every table of this source's
// share, making first every decision the group allows.
func (c *Coordinator) StatesOptimistic(ctx context.Context, target Table) (map[Table]OptState, error) {
	g, err := optSettle(ctx, c.cli, c.keys, c.lg, c.task, target, c.source)
	if err != nil {
		return nil, err
	}
	out := map[Table]OptState{}
	for _, t := range g.shares[c.source].v.Tables {
		out[t] = g.optState(c.member(t))
	}
	return out, nil
}

// WaitOptimistic blocks until done, given the states of this source's
// tables (StatesOptimistic), returns true, and returns those states. Every
// change of the group is a chance to decide, so every waiting worker is a
// decider. A worker in optimistic mode keeps one such wait per group while
// it runs, to learn of target changes it owns that another member's step
// decided (a table that left, conflicts that converged).
func (c *Coordinator) WaitOptimistic(ctx context.Context, target Table, done func(map[Table]OptState) bool) (map[Table]OptState, error) {
	var out map[Table]OptState
	err := c.watchGroup(ctx, target, func(ctx context.Context) (bool, error) {
		states, err := c.StatesOptimistic(ctx, target)
		if err != nil || !done(states) {
			return false, err
		}
		out = states
		return true, nil
	})
	return out, err
}

// optSettle makes every decision the group allows, one guarded transaction
// each (optPlan), and returns the group as last read. actor is the source
// of the worker deciding: it owns the changes no report caused.
func optSettle(ctx context.Context, cli *clientv3.Client, k keys, lg *zap.Logger, task string, target Table, actor string) (*group, error) {
	retry := backoff.New(stepRetryMin, stepRetryMax)
	for attempt := 0; ; attempt++ {
		g, err := readGroup(ctx, cli, k, task, target)
		if err != nil {
			return nil, err
		}
		ops, what := g.optPlan(k, actor)
		if len(ops) == 0 {
			return g, nil
		}
		ops = withVersion(g, what, ops)
		resp, err := cli.Txn(ctx).If(g.guards()...).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("shardddl: %s on lock %s: %w", what, LockID(task, target), err)
		}
		if resp.Succeeded {
			lg.Info("optimistic shard DDL decision", zap.String("lock", LockID(task, target)),
				zap.String("decision", what), zap.Int64("rev", resp.Header.Revision))
			retry = backoff.New(stepRetryMin, stepRetryMax)
			continue
		}
		if !backoff.Sleep(ctx, backoff.RealClock{}, retry.Next()) {
			return nil, context.Cause(ctx)
		}
	}
}
