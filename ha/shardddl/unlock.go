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
// again):
//
//   - undecided lock, without forceRemove: the lock is decided now with the
//     members that reached the DDLs (synced); the owner is the first synced
//     table of source owner (default: the first synced table); the members
//     that did not reach it (unsynced) get an info pre-resolved as
//     "unlocked" and count as acknowledged, so they skip the DDLs when they
//     reach them. The owner's worker then runs the DDLs, the synced members
//     skip, and the lock is removed as usual. Refused when the synced
//     members reached different DDLs (ErrConflict): use forceRemove.
//   - decided lock, without forceRemove: owner names another source whose
//     member runs the DDLs instead of the current owner (whose worker is
//     gone); refused once the owner began (it may have run them).
//   - forceRemove: the lock is removed and nobody runs the DDLs: every
//     member's info is resolved as "force-removed" (pre-resolved for the
//     unsynced ones), so each skips the DDLs.
func Unlock(ctx context.Context, cli *clientv3.Client, prefix, lockID, owner string, forceRemove bool) error {
	task, target, err := ParseLockID(lockID)
	if err != nil {
		return err
	}
	k := newKeys(prefix)
	return step(ctx, cli, k, task, target, "unlock", func(g *group) ([]clientv3.Cmp, []clientv3.Op, error) {
		if g.lock != nil {
			return unlockDecided(g, owner, forceRemove)
		}
		return unlockPending(g, owner, forceRemove)
	})
}

func unlockDecided(g *group, owner string, force bool) ([]clientv3.Cmp, []clientv3.Op, error) {
	l := g.lock.v
	cmps := g.guards()
	if force {
		ops := []clientv3.Op{clientv3.OpDelete(g.lock.key)}
		for _, s := range l.Members {
			if _, ok := l.acked(s.Member); ok {
				continue
			}
			op, err := resolvedInfo(g, s.Member, l.DDLs, ResolvedForceRemoved)
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, op)
		}
		return cmps, ops, nil
	}
	if owner == "" || owner == l.Owner.Source {
		return nil, nil, fmt.Errorf("shardddl: lock %s is decided and waits for its owner %s to run %s; "+
			"name another --owner or use --force-remove", l.ID, l.Owner, quoteDDLs(l.DDLs))
	}
	if l.Done || l.Executing {
		return nil, nil, fmt.Errorf("shardddl: owner %s of lock %s began running %s; check the target "+
			"and use --force-remove if the DDLs ran", l.Owner, l.ID, quoteDDLs(l.DDLs))
	}
	next := -1
	for i, s := range l.Members {
		if _, ok := l.acked(s.Member); !ok && s.Source == owner {
			next = i
			break
		}
	}
	if next < 0 {
		return nil, nil, fmt.Errorf("shardddl: source %s has no unacknowledged member of lock %s to run its DDLs", owner, l.ID)
	}
	l.Owner = l.Members[next].Member
	l.Unlock = &UnlockRecord{Owner: owner}
	op, err := jsonOp(g.lock.key, l)
	if err != nil {
		return nil, nil, err
	}
	return cmps, []clientv3.Op{op}, nil
}

func unlockPending(g *group, owner string, force bool) ([]clientv3.Cmp, []clientv3.Op, error) {
	id := LockID(g.task, g.target)
	p := g.analyze()
	if len(p.synced) == 0 {
		return nil, nil, fmt.Errorf("%w: %s has no member waiting on a DDL", ErrNoLock, id)
	}
	ddls := p.first.v.DDLs
	cmps := append(g.guards(), clientv3.Compare(clientv3.CreateRevision(g.prefix+segLock), "=", 0))
	var ops []clientv3.Op
	if force {
		for _, m := range append(slices.Clone(p.synced), p.unsynced...) {
			op, err := resolvedInfo(g, m, ddls, ResolvedForceRemoved)
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, op)
		}
		return cmps, ops, nil
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
	for _, m := range p.unsynced {
		seq := g.infos[m].v.Seq + 1 // absent info: 0+1
		l.Members = append(l.Members, Seat{Member: m, Seq: seq})
		l.Acks = append(l.Acks, Ack{Member: m, How: ResolvedUnlocked})
		op, err := resolvedInfo(g, m, ddls, ResolvedUnlocked)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, op)
	}
	slices.SortFunc(l.Members, func(a, b Seat) int { return a.compare(b.Member) })
	op, err := jsonOp(g.prefix+segLock, l)
	if err != nil {
		return nil, nil, err
	}
	return cmps, append(ops, op), nil
}

// resolvedInfo is the put of m's info resolved with how: its unresolved
// info if it has one, else a pre-resolved info for its next DDL (no
// location: the table has not reached it; it skips it when it does).
func resolvedInfo(g *group, m Member, ddls []string, how string) (clientv3.Op, error) {
	i, ok := g.infos[m]
	v := i.v
	if !ok || v.Resolved != "" {
		v = InfoValue{Seq: i.v.Seq + 1, DDLs: ddls}
	}
	v.Resolved = how
	return jsonOp(keys{}.infoUnder(g, m), v)
}

// infoUnder is the info key of m in g.
func (keys) infoUnder(g *group, m Member) string {
	return g.prefix + segInfo + "/" + m.Source + "/" + escape(m.Schema) + "/" + escape(m.Name)
}
