package shardddl

import (
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/shardschema"
)

// optInfo is the listing of an optimistic group; false when nothing is
// outstanding and every member has the joined schema. Synced members have
// the joined schema (DM's "ready"); unsynced ones differ from it, have an
// undecided or conflicting DDL, or have no schema in the group yet. Owner
// and DDLs are the outstanding target change's, else the first
// conflicting or undecided member's DDLs.
func (g *group) optInfo() (LockInfo, bool) {
	li := LockInfo{ID: LockID(g.task, g.target), Task: g.task, Mode: ModeOptimistic,
		Target: g.target.String(), Synced: []MemberTable{}, Unsynced: []MemberTable{}}
	joined, _ := g.optJoinedNow()
	var conflicts, news []Member
	for _, m := range g.members() {
		mt := MemberTable{Source: m.Source, Table: m.Table.String()}
		kv, ok := g.optTables[m]
		var r *OptReportValue
		if ok {
			r = kv.v.Report
		}
		switch {
		case r != nil && r.State == OptConflict:
			conflicts = append(conflicts, m)
		case r != nil && r.State == OptNew:
			news = append(news, m)
		case ok && kv.v.Model != nil && shardschema.Equal(kv.v.Model, joined):
			li.Synced = append(li.Synced, mt)
			continue
		}
		li.Unsynced = append(li.Unsynced, mt)
	}
	switch {
	case g.optExec != nil:
		e := g.optExec.v
		li.Owner, li.DDLs, li.State = e.Owner.Source, e.DDLs, LockDecided
		if e.Executing {
			li.State = LockExecuting
		}
	case len(conflicts) > 0:
		r := g.optTables[conflicts[0]].v.Report
		li.DDLs, li.Conflict, li.State = r.DDLs, r.Conflict, LockConflict
	case len(news) > 0:
		li.DDLs, li.State = g.optTables[news[0]].v.Report.DDLs, LockWaiting
	case len(li.Unsynced) > 0:
		li.State = LockUnsynced
	default:
		return LockInfo{}, false
	}
	if len(conflicts) > 0 && li.Conflict == "" {
		li.Conflict = g.optTables[conflicts[0]].v.Report.Conflict
	}
	return li, true
}

// unlockOptimistic is Unlock of an optimistic group. DM's unlock-ddl-lock
// is for pessimistic locks only; its optimistic conflicts are resolved on
// the conflicting table (handle-error replace or skip, which report the
// DDL again). Here:
//
//   - --owner SOURCE: the outstanding target change moves to a table of
//     SOURCE (its owner's worker is gone for good), refused once the owner
//     began it;
//   - --force-remove: every undecided or conflicting DDL is dropped (the
//     table counts with its schema before it and its worker skips the DDL,
//     state force-removed) and an outstanding target change is removed
//     unrun: the target is taken to have it (run its statements by hand if
//     it does not);
//   - neither: refused, naming the conflict and these remedies.
//
// A --force-remove of more tables than one transaction holds drops
// maxOptPutsPerTxn of them and returns more; the next steps pass first,
// the revision the first step read (0 in the first): they drop only the
// DDLs that were there then, find nothing left without error and leave
// any target change decided since alone.
func unlockOptimistic(g *group, owner string, force bool, first int64) ([]clientv3.Cmp, []clientv3.Op, bool, error) {
	cont := first > 0
	id := LockID(g.task, g.target)
	var conflicts []Member
	var ops []clientv3.Op
	more := false
	for _, m := range g.sortedOptMembers() {
		kv := g.optTables[m]
		r := kv.v.Report
		if r == nil || (r.State != OptConflict && r.State != OptNew) || (cont && kv.rev > first) {
			continue
		}
		if r.State == OptConflict {
			conflicts = append(conflicts, m)
		}
		if force && len(ops) == maxOptPutsPerTxn {
			more = true
			break
		}
		if force {
			v := kv.v
			nr := *r
			nr.State, nr.Conflict, nr.Hard, nr.Exec = OptForceRemoved, "", false, 0
			if nr.Before != nil {
				v.Model = nr.Before
			}
			v.Report = &nr
			ops = append(ops, mustJSONOp(kv.key, v))
		}
	}
	e := g.optExec
	if force {
		if e != nil && !cont {
			ops = append(ops, clientv3.OpDelete(e.key))
		}
		switch {
		case len(ops) == 0 && cont:
			return nil, nil, false, nil
		case len(ops) == 0:
			return nil, nil, false, fmt.Errorf("%w: optimistic lock %s has no undecided DDL, conflict or target change to remove", ErrNoLock, id)
		}
		return g.guards(), ops, more, nil
	}
	if e != nil && owner != "" && owner != e.v.Owner.Source {
		if e.v.Executing {
			return nil, nil, false, fmt.Errorf("shardddl: owner %s of the change of optimistic lock %s to version %d began running %s; "+
				"check the target and use --force-remove once it has the change", e.v.Owner, id, e.v.Version, quoteDDLs(e.v.DDLs))
		}
		for _, m := range g.sortedOptMembers() {
			if m.Source == owner && g.isMember(m) {
				v := e.v
				v.Owner = m
				return g.guards(), []clientv3.Op{mustJSONOp(e.key, v)}, false, nil
			}
		}
		return nil, nil, false, fmt.Errorf("shardddl: source %s has no table in optimistic lock %s to run its change", owner, id)
	}
	switch {
	case e != nil:
		return nil, nil, false, fmt.Errorf("shardddl: optimistic lock %s waits for %s to run %s (change %d); name another --owner "+
			"or use --force-remove", id, e.v.Owner, quoteDDLs(e.v.DDLs), e.v.Version)
	case len(conflicts) > 0:
		return nil, nil, false, fmt.Errorf("%w: %s; an optimistic lock has nothing to decide: replace or skip the DDL on the table "+
			"(task handle-error) or drop it with --force-remove", ErrConflict, g.optTables[conflicts[0]].v.Report.Conflict)
	}
	return nil, nil, false, fmt.Errorf("%w: optimistic lock %s has no conflict and no target change outstanding", ErrNoLock, id)
}

// sortedOptMembers are the members with an opt/ key, sorted.
func (g *group) sortedOptMembers() []Member {
	out := make([]Member, 0, len(g.optTables))
	for m := range g.optTables {
		out = append(out, m)
	}
	slices.SortFunc(out, Member.compare)
	return out
}
