package shardddl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
)

// DefaultPrefix is the cluster prefix P when none is given (as in ha).
const DefaultPrefix = "/dm"

// Coordinator is one worker's side of the shard DDL locks of one task and
// source. It keeps nothing in memory: every method reads the group from
// etcd and writes in one guarded transaction, so a Coordinator created
// after a restart sees exactly what the previous one left. It never closes
// the client. Methods may be called from several goroutines.
type Coordinator struct {
	cli    *clientv3.Client
	keys   keys
	task   string
	source string
	lg     *zap.Logger
}

// New returns the Coordinator of task and source on cli under the cluster
// prefix (empty: DefaultPrefix). lg may be nil.
func New(cli *clientv3.Client, prefix, task, source string, lg *zap.Logger) (*Coordinator, error) {
	if err := config.ValidateName("task", task); err != nil {
		return nil, fmt.Errorf("shardddl: coordinator: %w", err)
	}
	if err := config.ValidateName("source", source); err != nil {
		return nil, fmt.Errorf("shardddl: coordinator: %w", err)
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	return &Coordinator{cli: cli, keys: newKeys(prefix), task: task, source: source,
		lg: lg.With(zap.String("task", task), zap.String("source", source))}, nil
}

func newKeys(prefix string) keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return keys{prefix: strings.TrimSuffix(prefix, "/")}
}

// member is the member of this source for an upstream table.
func (c *Coordinator) member(t Table) Member { return Member{Source: c.source, Table: t} }

// stepFunc decides one step from a fresh read of the group: the guards of
// its transaction and its operations. No operations: nothing to write.
type stepFunc func(g *group) ([]clientv3.Cmp, []clientv3.Op, error)

// step runs f on fresh reads of the group until its transaction commits
// (or it has nothing to write) and returns the read it was decided from.
func step(ctx context.Context, cli *clientv3.Client, k keys, task string, target Table, what string, f stepFunc) error {
	for {
		g, err := readGroup(ctx, cli, k, task, target)
		if err != nil {
			return err
		}
		cmps, ops, err := f(g)
		if err != nil || len(ops) == 0 {
			return err
		}
		resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("shardddl: %s on lock %s: %w", what, LockID(task, target), err)
		}
		if resp.Succeeded {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// settle decides the group's lock if it is ready and returns the group as
// read after that (the read the last decision attempt saw undecidable, or
// the one after the decision).
func settle(ctx context.Context, cli *clientv3.Client, k keys, lg *zap.Logger, task string, target Table) (*group, error) {
	for {
		g, err := readGroup(ctx, cli, k, task, target)
		if err != nil {
			return nil, err
		}
		if g.lock != nil {
			return g, nil
		}
		p := g.analyze()
		if !p.ready() {
			return g, nil
		}
		ok, err := decide(ctx, cli, g, p)
		if err != nil {
			return nil, err
		}
		if ok {
			lg.Info("shard DDL lock decided", zap.String("lock", LockID(task, target)),
				zap.Stringer("owner", p.owner), zap.Strings("ddls", p.first.v.DDLs), zap.Int64("rev", g.rev))
		}
		// Decided by us or refused (someone changed the group, or decided
		// first): read again.
	}
}

// decide writes the decision of p: created only if no lock key exists and
// the group is as read.
func decide(ctx context.Context, cli *clientv3.Client, g *group, p pending) (bool, error) {
	l := LockValue{ID: LockID(g.task, g.target), Owner: p.owner, DDLs: p.first.v.DDLs}
	for _, m := range g.members() {
		l.Members = append(l.Members, Seat{Member: m, Seq: g.infos[m].v.Seq})
	}
	key := g.prefix + segLock
	op, err := jsonOp(key, l)
	if err != nil {
		return false, err
	}
	cmps := append(g.guards(), clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	resp, err := cli.Txn(ctx).If(cmps...).Then(op).Commit()
	if err != nil {
		return false, fmt.Errorf("shardddl: decide lock %s: %w", l.ID, err)
	}
	return resp.Succeeded, nil
}

// PutShare publishes this source's share of the group of target: the
// upstream tables of the source routed to it. Call it when the subtask
// starts and whenever a routed table is created, renamed or dropped; nil
// tables removes the source from the group. A table that leaves the share
// leaves the group: its info is deleted and, if a decided lock waits for
// its acknowledgement, it is acknowledged as dropped, all in the same
// transaction, so a lock that waited only for it resolves.
func (c *Coordinator) PutShare(ctx context.Context, target Table, tables []Table) error {
	tables = sortTables(tables)
	err := step(ctx, c.cli, c.keys, c.task, target, "put the share of source "+c.source, func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		key := c.keys.share(c.task, target, c.source)
		old, had := g.shares[c.source]
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", old.rev)}
		var ops []clientv3.Op
		switch {
		case len(tables) == 0 && had:
			ops = append(ops, clientv3.OpDelete(key))
		case len(tables) > 0 && (!had || !slices.Equal(old.v.Tables, tables)):
			op, err := jsonOp(key, ShareValue{Tables: tables})
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, op)
		}
		var gone []Member
		for _, m := range g.sortedInfoMembers() {
			if m.Source == c.source && !slices.Contains(tables, m.Table) {
				i := g.infos[m]
				gone = append(gone, m)
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(i.key), "=", i.rev))
				ops = append(ops, clientv3.OpDelete(i.key))
			}
		}
		if g.lock != nil {
			l := g.lock.v
			changed := false
			for _, s := range l.Members {
				if s.Source == c.source && !slices.Contains(tables, s.Table) {
					if _, ok := l.acked(s.Member); !ok {
						l.Acks = append(l.Acks, Ack{Member: s.Member, How: "dropped"})
						changed = true
					}
				}
			}
			if changed {
				lockCmps, lockOps, err := c.writeLock(g, l)
				if err != nil {
					return nil, nil, err
				}
				cmps, ops = append(cmps, lockCmps...), append(ops, lockOps...)
			}
		}
		if len(gone) > 0 && len(ops) > 0 {
			c.lg.Info("tables left the sharding group", zap.String("lock", LockID(c.task, target)),
				zap.Stringers("tables", gone))
		}
		return cmps, ops, nil
	})
	if err != nil {
		return err
	}
	_, err = settle(ctx, c.cli, c.keys, c.lg, c.task, target)
	return err
}

// writeLock returns the guard and operations that replace the lock of g by
// l, or delete it when every member acknowledged. A dropped owner that had
// not run the DDLs hands the lock to the first member left.
func (c *Coordinator) writeLock(g *group, l LockValue) ([]clientv3.Cmp, []clientv3.Op, error) {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(g.lock.key), "=", g.lock.rev)}
	if l.complete() {
		return cmps, []clientv3.Op{clientv3.OpDelete(g.lock.key)}, nil
	}
	if a, ok := l.acked(l.Owner); ok && a.How == "dropped" && !l.Done {
		for _, s := range l.Members {
			if _, acked := l.acked(s.Member); !acked {
				l.Owner, l.Executing = s.Member, false
				break
			}
		}
	}
	op, err := jsonOp(g.lock.key, l)
	if err != nil {
		return nil, nil, err
	}
	return cmps, []clientv3.Op{op}, nil
}

// Report is what a table reached: its DDLs, rewritten for the target
// table, and the binlog location of the DDL.
type Report struct {
	Target   Table
	Table    Table // the upstream table, of the Coordinator's source
	DDLs     []string
	Location Location
}

// Report records that the upstream table reached DDLs, decides the lock if
// every member reached them, and returns the table's state. Reporting the
// same DDLs again is harmless: while unresolved it changes nothing; once
// resolved, the same DDLs at the same location (a replay after a restart)
// return RoleResolved. Other DDLs while unresolved replace the table's
// info (how handle-error replace resolves a conflict), unless the lock was
// decided with the old ones (ErrWrongRole).
func (c *Coordinator) Report(ctx context.Context, r Report) (LockState, error) {
	m := c.member(r.Table)
	if len(r.DDLs) == 0 {
		return LockState{}, fmt.Errorf("shardddl: report of %s to lock %s has no DDL", m, LockID(c.task, r.Target))
	}
	err := step(ctx, c.cli, c.keys, c.task, r.Target, "report the DDL of "+m.String(), func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		return c.reportTxn(g, m, r)
	})
	if err != nil {
		return LockState{}, err
	}
	return c.stateAfterSettle(ctx, r.Target, m)
}

func (c *Coordinator) reportTxn(g *group, m Member, r Report) ([]clientv3.Cmp, []clientv3.Op, error) {
	if !g.isMember(m) {
		return nil, nil, fmt.Errorf("%w: %s is not in the share of source %s of lock %s; PutShare first",
			ErrNotMember, m, c.source, LockID(c.task, r.Target))
	}
	key := c.keys.info(c.task, r.Target, m)
	cur, had := g.infos[m]
	next := InfoValue{Seq: 1, DDLs: slices.Clone(r.DDLs), Location: r.Location}
	switch {
	case had && cur.v.Resolved == "" && slices.Equal(cur.v.DDLs, r.DDLs):
		return nil, nil, nil // already reported
	case had && cur.v.Resolved == "":
		if g.lock != nil {
			if s, ok := g.lock.v.seat(m); ok && s.Seq == cur.v.Seq {
				return nil, nil, fmt.Errorf("%w: %s reported %s but lock %s was decided with %s; "+
					"finish the lock or remove it with shard-ddl-lock unlock --force-remove",
					ErrWrongRole, m, quoteDDLs(r.DDLs), LockID(c.task, r.Target), quoteDDLs(cur.v.DDLs))
			}
		}
		next.Seq = cur.v.Seq // replaces the unresolved DDL
	case had && slices.Equal(cur.v.DDLs, r.DDLs) && (cur.v.Location == r.Location || cur.v.Location.IsZero()):
		if !cur.v.Location.IsZero() {
			return nil, nil, nil // a replay of a resolved DDL
		}
		next = cur.v // pre-resolved by an unlock: now at its location
		next.Location = r.Location
	case had:
		next.Seq = cur.v.Seq + 1
	}
	op, err := jsonOp(key, next)
	if err != nil {
		return nil, nil, err
	}
	share := g.shares[m.Source]
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(key), "=", cur.rev),
		clientv3.Compare(clientv3.ModRevision(share.key), "=", share.rev),
		clientv3.Compare(clientv3.ModRevision(c.keys.lock(c.task, r.Target)), "=", lockRev(g)),
	}
	return cmps, []clientv3.Op{op}, nil
}

func lockRev(g *group) int64 {
	if g.lock == nil {
		return 0
	}
	return g.lock.rev
}

// stateAfterSettle decides the lock if ready and returns m's state.
func (c *Coordinator) stateAfterSettle(ctx context.Context, target Table, m Member) (LockState, error) {
	g, err := settle(ctx, c.cli, c.keys, c.lg, c.task, target)
	if err != nil {
		return LockState{}, err
	}
	return g.state(m), nil
}

// State returns the state of the upstream table in the group of target,
// deciding the lock first if it is ready.
func (c *Coordinator) State(ctx context.Context, target, table Table) (LockState, error) {
	return c.stateAfterSettle(ctx, target, c.member(table))
}

// Begin records that the owner is about to run the lock's DDLs. After it, a
// restarted owner sees RoleOwnerPending and must check the target before
// running them again.
func (c *Coordinator) Begin(ctx context.Context, target, table Table) (LockState, error) {
	m := c.member(table)
	err := step(ctx, c.cli, c.keys, c.task, target, "begin the DDL of "+m.String(), func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		switch st := g.state(m); st.Role {
		case RoleOwnerPending:
			return nil, nil, nil
		case RoleOwner:
		default:
			return nil, nil, wrongRole(g, m, "begin", st)
		}
		l := g.lock.v
		l.Executing = true
		return c.writeLock(g, l)
	})
	if err != nil {
		return LockState{}, err
	}
	return c.stateAfterSettle(ctx, target, m)
}

// Done records that the owner ran the lock's DDLs on the target: the other
// members then skip them. Done by an owner that already is done (a retry)
// succeeds.
func (c *Coordinator) Done(ctx context.Context, target, table Table) (LockState, error) {
	return c.resolve(ctx, target, table, ResolvedExecuted)
}

// Ack records that a member skipped the DDLs the owner ran (RoleSkip).
func (c *Coordinator) Ack(ctx context.Context, target, table Table) (LockState, error) {
	return c.resolve(ctx, target, table, ResolvedSkipped)
}

// resolve acknowledges m's seat with how, resolves its info and, when it
// is the last acknowledgement, deletes the lock, in one transaction.
func (c *Coordinator) resolve(ctx context.Context, target, table Table, how string) (LockState, error) {
	m := c.member(table)
	err := step(ctx, c.cli, c.keys, c.task, target, how+" the DDL of "+m.String(), func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		st := g.state(m)
		switch {
		case st.Role == RoleResolved:
			return nil, nil, nil // a retry
		case how == ResolvedExecuted && (st.Role == RoleOwner || st.Role == RoleOwnerPending):
		case how == ResolvedSkipped && st.Role == RoleSkip:
		default:
			return nil, nil, wrongRole(g, m, how, st)
		}
		l := g.lock.v
		l.Acks = append(l.Acks, Ack{Member: m, How: how})
		if how == ResolvedExecuted {
			l.Done = true
		}
		cmps, ops, err := c.writeLock(g, l)
		if err != nil {
			return nil, nil, err
		}
		i := g.infos[m]
		v := i.v
		v.Resolved = how
		op, err := jsonOp(i.key, v)
		if err != nil {
			return nil, nil, err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(i.key), "=", i.rev))
		if l.complete() {
			c.lg.Info("shard DDL lock resolved", zap.String("lock", l.ID), zap.Int64("rev", g.rev))
		}
		return cmps, append(ops, op), nil
	})
	if err != nil {
		return LockState{}, err
	}
	return c.stateAfterSettle(ctx, target, m)
}

func wrongRole(g *group, m Member, what string, st LockState) error {
	return fmt.Errorf("%w: %s cannot %s on lock %s in role %s", ErrWrongRole, m, what, LockID(g.task, g.target), st.Role)
}

// isTerminal is true for errors a retry cannot cure.
func isTerminal(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrBadKey) || errors.Is(err, ErrNotMember) ||
		errors.Is(err, ErrWrongRole)
}
