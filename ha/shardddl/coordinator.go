package shardddl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/backoff"
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

// Pacing of a step whose guard failed: the workers of a group's shards
// report at about the same moment, and a step that re-read at once would
// meet the same writers again; a jittered pause from stepRetryMin doubling
// to stepRetryMax spreads them. The first attempt never waits.
const (
	stepRetryMin = time.Millisecond
	stepRetryMax = 100 * time.Millisecond
)

// step runs f on a fresh read of the group and commits what it decided,
// with a put of the version key when it deletes (withVersion); when a guard
// fails (the group changed since the read) it pauses briefly, reads and
// decides again. It returns when a transaction committed, f has nothing to
// write, or f, etcd or ctx fails.
func step(ctx context.Context, cli *clientv3.Client, k keys, task string, target Table, what string, f stepFunc) error {
	retry := backoff.New(stepRetryMin, stepRetryMax)
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !backoff.Sleep(ctx, backoff.RealClock{}, retry.Next()) {
			return context.Cause(ctx)
		}
		g, err := readGroup(ctx, cli, k, task, target)
		if err != nil {
			return err
		}
		cmps, ops, err := f(g)
		if err != nil || len(ops) == 0 {
			return err
		}
		ops = withVersion(g, what, ops)
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

// withVersion adds the put of the group's version key to ops that delete a
// key of the group and do not put it already (see group.guards).
func withVersion(g *group, what string, ops []clientv3.Op) []clientv3.Op {
	deletes := false
	for _, op := range ops {
		if string(op.KeyBytes()) == g.prefix+segVersion {
			return ops
		}
		deletes = deletes || op.IsDelete()
	}
	if !deletes {
		return ops
	}
	return append(ops, g.bumpVersion(what))
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
	key := g.lockKey()
	cmps := append(g.guards(), clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	resp, err := cli.Txn(ctx).If(cmps...).Then(mustJSONOp(key, l)).Commit()
	if err != nil {
		return false, fmt.Errorf("shardddl: decide lock %s: %w", l.ID, err)
	}
	return resp.Succeeded, nil
}

// maxDeletesPerTxn bounds the info deletions of one PutShare transaction
// (etcd's default --max-txn-ops is 128); a share that drops more tables is
// written in steps, each a valid share.
const maxDeletesPerTxn = 100

// PutShare publishes this source's share of the group of target: the
// upstream tables of the source routed to it. Call it when the subtask
// starts and whenever a routed table is created, renamed or dropped; nil
// tables removes the source from the group. A table that leaves the share
// leaves the group: its info and any unlock skip of it are deleted and, if
// a decided lock waits for its acknowledgement, it is acknowledged as
// dropped, all in the same transaction, so a lock that waited only for it
// resolves. The transaction is guarded by the whole group as read.
func (c *Coordinator) PutShare(ctx context.Context, target Table, tables []Table) error {
	tables = sortTables(tables)
	for more := true; more; {
		err := step(ctx, c.cli, c.keys, c.task, target, "put the share of source "+c.source, func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
			var ops []clientv3.Op
			ops, more, _ = c.shareOps(g, tables)
			return g.guards(), ops, nil
		})
		if err != nil {
			return err
		}
	}
	_, err := settle(ctx, c.cli, c.keys, c.lg, c.task, target)
	return err
}

// shareOps are the operations that make the share of g be tables; more is
// true when only part of the removed tables fit in one transaction (the
// share written then still holds the others); gone are the members these
// operations remove.
func (c *Coordinator) shareOps(g *group, tables []Table) (ops []clientv3.Op, more bool, gone []Member) {
	key := c.keys.share(c.task, g.target, c.source)
	old, had := g.shares[c.source]
	for _, m := range g.sortedInfoMembers() {
		if m.Source == c.source && !slices.Contains(tables, m.Table) {
			gone = append(gone, m)
		}
	}
	for _, t := range old.v.Tables {
		if m := c.member(t); !slices.Contains(tables, t) && !slices.Contains(gone, m) {
			gone = append(gone, m)
		}
	}
	write := tables
	if len(gone) > maxDeletesPerTxn && len(tables) > 0 {
		// Keep the rest of the removed tables in the share for now.
		write = slices.Clone(tables)
		for _, m := range gone[maxDeletesPerTxn:] {
			write = append(write, m.Table)
		}
		write, gone, more = sortTables(write), gone[:maxDeletesPerTxn], true
	}
	switch {
	case len(write) == 0 && had:
		ops = append(ops, clientv3.OpDelete(key))
	case len(write) > 0 && (!had || !slices.Equal(old.v.Tables, write)):
		ops = append(ops, mustJSONOp(key, ShareValue{Tables: write}))
	}
	if len(write) == 0 {
		ops = append(ops, clientv3.OpDelete(c.keys.sourceInfos(c.task, g.target, c.source), clientv3.WithPrefix()))
	} else {
		for _, m := range gone {
			if _, ok := g.infos[m]; ok {
				ops = append(ops, clientv3.OpDelete(g.infoKey(m)))
			}
		}
	}
	ops = append(ops, c.dropFromLock(g, gone)...)
	if len(ops) == 0 || (len(write) == 0 && !had && len(gone) == 0) {
		return nil, more, gone
	}
	if len(gone) > 0 {
		c.lg.Info("tables leave the sharding group", zap.String("lock", LockID(c.task, g.target)),
			zap.Stringers("tables", gone))
	}
	return append(ops, g.bumpVersion("put share")), more, gone
}

// dropFromLock acknowledges gone members of the decided lock as dropped
// and removes their unlock skips.
func (c *Coordinator) dropFromLock(g *group, gone []Member) []clientv3.Op {
	var ops []clientv3.Op
	if g.lock != nil {
		l := g.lock.v
		l.Acks = slices.Clone(l.Acks)
		changed := false
		for _, m := range gone {
			if _, seated := l.seat(m); seated {
				if _, acked := l.acked(m); !acked {
					l.Acks = append(l.Acks, Ack{Member: m, How: ResolvedDropped})
					changed = true
				}
			}
		}
		if changed {
			ops = append(ops, lockOps(g, l)...)
		}
	}
	if g.unlock != nil {
		u := UnlockValue{Skips: slices.DeleteFunc(slices.Clone(g.unlock.v.Skips),
			func(s Skip) bool { return slices.Contains(gone, s.Member) })}
		if len(u.Skips) != len(g.unlock.v.Skips) {
			ops = append(ops, unlockOps(g, u)...)
		}
	}
	return ops
}

// lockOps replace the lock of g by l, or delete it when every member
// acknowledged. A dropped owner that had not run the DDLs hands the lock to
// the first member left.
func lockOps(g *group, l LockValue) []clientv3.Op {
	if l.complete() {
		return []clientv3.Op{clientv3.OpDelete(g.lockKey())}
	}
	if a, ok := l.acked(l.Owner); ok && a.How == ResolvedDropped && !l.Done {
		for _, s := range l.Members {
			if _, acked := l.acked(s.Member); !acked {
				l.Owner, l.Executing = s.Member, false
				break
			}
		}
	}
	return []clientv3.Op{mustJSONOp(g.lockKey(), l)}
}

// unlockOps write u, or delete the unlock key when no skip is left.
func unlockOps(g *group, u UnlockValue) []clientv3.Op {
	if len(u.Skips) == 0 {
		return []clientv3.Op{clientv3.OpDelete(g.unlockKey())}
	}
	return []clientv3.Op{mustJSONOp(g.unlockKey(), u)}
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
	if g.optimistic() {
		return nil, nil, fmt.Errorf("%w: lock %s is coordinated in optimistic mode (opt/ keys); a task has one shard-mode",
			ErrMixedModes, LockID(c.task, r.Target))
	}
	if !g.isMember(m) {
		return nil, nil, fmt.Errorf("%w: %s is not in the share of source %s of lock %s; PutShare first",
			ErrNotMember, m, c.source, LockID(c.task, r.Target))
	}
	key := c.keys.info(c.task, r.Target, m)
	cur, had := g.infos[m]
	next := InfoValue{Seq: 1, DDLs: slices.Clone(r.DDLs), Location: r.Location}
	switch {
	case had && r.Location.Before(cur.v.Location):
		// A replay of an earlier DDL of the table (a restart from a
		// checkpoint before it): that one was resolved before the table
		// reached its current one. The caller sees the later Location.
		return nil, nil, nil
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
	case had && cur.v.Resolved != "" && cur.v.Location == r.Location:
		// A replay of a resolved DDL; its DDLs may differ from the
		// resolved ones when handle-error replaced them.
		return nil, nil, nil
	case had:
		next.Seq = cur.v.Seq + 1
	}
	share := g.shares[m.Source]
	cmps := []clientv3.Cmp{keyRev(key, cur.rev), keyRev(share.key, share.rev), keyRev(g.lockKey(), g.lockRev())}
	return cmps, []clientv3.Op{mustJSONOp(key, next)}, nil
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
		return []clientv3.Cmp{keyRev(g.lockKey(), g.lock.rev)}, lockOps(g, l), nil
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

// resolve acknowledges m's seat with how (or consumes its unlock skip),
// resolves its info and, when it is the last acknowledgement, deletes the
// lock, in one transaction guarded by m's info, the lock and the unlock
// key as read.
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
		i := g.infos[m]
		cmps := []clientv3.Cmp{keyRev(i.key, i.rev), keyRev(g.lockKey(), g.lockRev()), keyRev(g.unlockKey(), g.unlockRev())}
		resolved := how
		var ops []clientv3.Op
		if sk, ok := g.skipAt(m, i.v.Seq); ok {
			resolved = sk.How
			ops = unlockOps(g, UnlockValue{Skips: slices.DeleteFunc(slices.Clone(g.unlock.v.Skips),
				func(s Skip) bool { return s.Member == m && s.Seq == sk.Seq })})
		} else {
			l := g.lock.v
			l.Acks = append(slices.Clone(l.Acks), Ack{Member: m, How: how})
			if how == ResolvedExecuted {
				l.Done = true
			}
			if l.complete() {
				c.lg.Info("shard DDL lock resolved", zap.String("lock", l.ID), zap.Int64("rev", g.rev))
			}
			ops = lockOps(g, l)
		}
		v := i.v
		v.Resolved = resolved
		return cmps, append(ops, mustJSONOp(i.key, v)), nil
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
