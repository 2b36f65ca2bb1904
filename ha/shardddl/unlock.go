package shardddl

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Unlock resolves a stuck lock as `dmctl shard-ddl-lock unlock LOCK
// [--owner SOURCE] [--force-remove]` does, in one transaction guarded by
// the whole group as read (a concurrent step makes it read and decide
// again). It writes no request for a worker to pick up: the operator's
// client makes the decision itself, fenced like any worker's.
//
//   - undecided lock, without forceRemove: the lock is decided now with the
//     members that reached the DDLs (synced); the owner is the first synced
//     table of source owner (default: the first synced table); each member
//     that did not reach them (unsynced) gets a skip in the unlock key and
//     skips them when it reaches them. The owner's worker then runs the
//     DDLs, the synced members skip, and the lock is removed as usual.
//     Refused when the synced members reached different DDLs (ErrConflict):
//     use forceRemove.
//   - decided lock, without forceRemove: owner names another source whose
//     member runs the DDLs instead of the current owner (whose worker is
//     gone); refused once the owner began (it may have run them).
//   - forceRemove: the lock is removed and nobody runs the DDLs: every
//     member that has not acknowledged gets a skip ("force-removed"), the
//     synced ones for the DDL they wait on, the unsynced ones for their
//     next.
//
// An optimistic lock is unlocked as unlockOptimistic says.
func Unlock(ctx context.Context, cli *clientv3.Client, prefix, lockID, owner string, forceRemove bool) error {
	task, target, err := ParseLockID(lockID)
	if err != nil {
		return err
	}
	// An optimistic --force-remove of many tables is written in steps
	// (unlockOptimistic's more); every other unlock is one.
	var first int64 // the revision the first step read
	for more := true; more; {
		more = false
		err := step(ctx, cli, newKeys(prefix), task, target, "unlock", func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
			if g.optimistic() {
				cmps, ops, m, err := unlockOptimistic(g, owner, forceRemove, first)
				if first == 0 {
					first = g.rev
				}
				more = m
				return cmps, ops, err
			}
			if g.lock != nil {
				return unlockDecided(g, owner, forceRemove)
			}
			return unlockPending(g, owner, forceRemove)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func unlockDecided(g *group, owner string, force bool) ([]clientv3.Cmp, []clientv3.Op, error) {
	l := g.lock.v
	if force {
		var skips []Skip
		for _, s := range l.Members {
			if _, ok := l.acked(s.Member); !ok {
				skips = append(skips, Skip{Member: s.Member, Seq: s.Seq, DDLs: l.DDLs, How: ResolvedForceRemoved})
			}
		}
		return g.guards(), []clientv3.Op{clientv3.OpDelete(g.lockKey()), putSkips(g, skips)}, nil
	}
	if owner == "" || owner == l.Owner.Source {
		return nil, nil, fmt.Errorf("shardddl: lock %s is decided and waits for its owner %s to run %s; "+
			"name another --owner or use --force-remove", l.ID, l.Owner, quoteDDLs(l.DDLs))
	}
	if l.Done || l.Executing {
		return nil, nil, fmt.Errorf("shardddl: owner %s of lock %s began running %s; check the target "+
			"and use --force-remove if the DDLs ran", l.Owner, l.ID, quoteDDLs(l.DDLs))
	}
	next := slices.IndexFunc(l.Members, func(s Seat) bool {
		_, acked := l.acked(s.Member)
		return !acked && s.Source == owner
	})
	if next < 0 {
		return nil, nil, fmt.Errorf("shardddl: source %s has no unacknowledged member of lock %s to run its DDLs", owner, l.ID)
	}
	l.Owner = l.Members[next].Member
	l.Unlock = &UnlockRecord{Owner: owner}
	return g.guards(), []clientv3.Op{mustJSONOp(g.lockKey(), l)}, nil
}

func unlockPending(g *group, owner string, force bool) ([]clientv3.Cmp, []clientv3.Op, error) {
	id := LockID(g.task, g.target)
	p := g.analyze()
	if len(p.synced) == 0 {
		return nil, nil, fmt.Errorf("%w: %s has no member waiting on a DDL", ErrNoLock, id)
	}
	ddls := p.first.v.DDLs
	how := ResolvedUnlocked
	if force {
		how = ResolvedForceRemoved
	}
	var skips []Skip
	for _, m := range p.unsynced {
		skips = append(skips, Skip{Member: m, Seq: g.nextSeq(m), DDLs: ddls, How: how})
	}
	if force {
		for _, m := range p.synced {
			i := g.infos[m]
			skips = append(skips, Skip{Member: m, Seq: i.v.Seq, DDLs: i.v.DDLs, How: how})
		}
		return g.guards(), []clientv3.Op{putSkips(g, skips)}, nil
	}
	if p.conflict != "" {
		return nil, nil, fmt.Errorf("%w: %s; unlock --force-remove removes the lock without running any", ErrConflict, p.conflict)
	}
	l := LockValue{ID: id, Owner: p.owner, DDLs: ddls, Unlock: &UnlockRecord{Owner: owner}}
	if owner != "" {
		i := slices.IndexFunc(p.synced, func(m Member) bool { return m.Source == owner })
		if i < 0 {
			return nil, nil, fmt.Errorf("shardddl: source %s has no member that reached the DDLs of lock %s", owner, id)
		}
		l.Owner = p.synced[i]
	}
	for _, m := range p.synced {
		l.Members = append(l.Members, Seat{Member: m, Seq: g.infos[m].v.Seq})
	}
	slices.SortFunc(l.Members, func(a, b Seat) int { return a.compare(b.Member) })
	cmps := append(g.guards(), clientv3.Compare(clientv3.CreateRevision(g.lockKey()), "=", 0))
	ops := []clientv3.Op{mustJSONOp(g.lockKey(), l)}
	if len(skips) > 0 {
		ops = append(ops, putSkips(g, skips))
	}
	return cmps, ops, nil
}

// nextSeq is the seq m's next DDL will get: one past its info and any skip
// already waiting for it.
func (g *group) nextSeq(m Member) int64 {
	seq := g.infos[m].v.Seq // 0 without an info
	for _, s := range g.skips() {
		if s.Member == m {
			seq = max(seq, s.Seq)
		}
	}
	return seq + 1
}

// putSkips writes the unlock key with skips added to those it holds (a
// skip of the same member and seq is replaced).
func putSkips(g *group, skips []Skip) clientv3.Op {
	out := slices.DeleteFunc(slices.Clone(g.skips()), func(old Skip) bool {
		return slices.ContainsFunc(skips, func(s Skip) bool { return s.Member == old.Member && s.Seq == old.Seq })
	})
	out = append(out, skips...)
	slices.SortFunc(out, func(a, b Skip) int {
		if c := a.compare(b.Member); c != 0 {
			return c
		}
		return int(max(min(a.Seq-b.Seq, 1), -1))
	})
	return mustJSONOp(g.unlockKey(), UnlockValue{Skips: out})
}
