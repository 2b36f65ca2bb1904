package shardddl

import (
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/shardschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// optPlan is the next decision of an optimistic group, as the operations
// of one transaction (to be guarded by the whole group as read), and what
// it is; no operations when nothing is decidable. In order:
//
//  1. While a target change is outstanding (opt/exec), nothing: every
//     decision is based on the joined schema the target will have, and
//     the tables whose DML needs the change wait for it anyway.
//  2. The first undecided report (by the revision of its key): applied
//     (the join changes: a target change owned by the reporting table;
//     or not: nothing to run) or a conflict.
//  3. Conflicting changes that every member followed (shardschema.
//     Converged): all applied at once, the latest of them owning the
//     target change.
//  4. The join of the members differs from the joined schema (a table
//     left): a target change owned by a table of actor, else the first.
func (g *group) optPlan(actor string) ([]clientv3.Op, string) {
	if g.optExec != nil {
		return nil, ""
	}
	var news []Member
	for m, kv := range g.optTables {
		if r := kv.v.Report; r != nil && r.State == OptNew && g.isMember(m) {
			news = append(news, m)
		}
	}
	if len(news) > 0 {
		slices.SortFunc(news, func(a, b Member) int {
			if d := g.optTables[a].rev - g.optTables[b].rev; d != 0 {
				return int(max(min(d, 1), -1))
			}
			return a.compare(b)
		})
		return g.optDecide(news[0])
	}
	if ops, what := g.optConverge(); len(ops) > 0 {
		return ops, what
	}
	return g.optRejoin(actor)
}

// optJoinedNow is the joined schema and its version (nil, 0 before the
// group's first decision).
func (g *group) optJoinedNow() (*sqlschema.Table, int64) {
	if g.optJoined == nil {
		return nil, 0
	}
	return g.optJoined.v.Model, g.optJoined.v.Version
}

// optCounted are the members' schemas the join counts (every member with
// a model), except skip, in member order.
func (g *group) optCounted(skip Member) []shardschema.Member {
	var out []shardschema.Member
	for _, m := range g.members() {
		if kv, ok := g.optTables[m]; ok && m != skip && kv.v.Model != nil {
			out = append(out, shardschema.Member{Name: m.String(), Table: kv.v.Model})
		}
	}
	return out
}

// optPending are the members held at a conflict that waiting may resolve.
func (g *group) optPending() []Member {
	var out []Member
	for _, m := range g.members() {
		if kv, ok := g.optTables[m]; ok && kv.v.Report != nil && kv.v.Report.State == OptConflict && !kv.v.Report.Hard {
			out = append(out, m)
		}
	}
	return out
}

func pendingOf(m Member, r *OptReportValue) shardschema.Pending {
	return shardschema.Pending{Name: m.String(), Prev: r.Before, Post: r.After}
}

// optDecide decides m's undecided report.
func (g *group) optDecide(m Member) ([]clientv3.Op, string) {
	kv := g.optTables[m]
	v := kv.v
	r := *v.Report
	name := m.String()
	joined, version := g.optJoinedNow()
	what := "decide the DDL of " + name

	conflict := func(reason string, hard bool) ([]clientv3.Op, string) {
		r.State, r.Hard = OptConflict, hard || r.Strict
		var also []string
		if !r.Hard && r.Before != nil {
			for _, o := range g.optPending() {
				if o == m {
					continue
				}
				or := g.optTables[o].v.Report
				if why := shardschema.Exclusive(pendingOf(m, &r), pendingOf(o, or)); why != "" {
					r.Hard = true
					also = append(also, why)
				}
			}
		}
		r.Conflict = g.optConflictMessage(m, &r, reason, also)
		if v.Model == nil {
			v.Model = r.Before // nil for a table that joined with a conflicting schema
		}
		v.Report = &r
		return []clientv3.Op{mustJSONOp(kv.key, v)}, what + ": conflict"
	}

	if r.Before != nil {
		if _, err := shardschema.Compare(name, r.Before, r.After); err != nil {
			return conflict(err.Error(), false)
		}
		if joined != nil {
			for _, c := range r.After.Columns {
				if r.Before.ColumnIndex(c.Name) < 0 && containsFold(v.Dropped, c.Name) && joined.ColumnIndex(c.Name) >= 0 {
					return conflict(fmt.Sprintf("it adds back column %s, which it dropped while the target kept it for the other tables: "+
						"its old values there would mix with the new ones (the target drops the column once every table dropped it)",
						sqlschema.QuoteName(c.Name)), true)
				}
			}
		}
	}
	next, err := shardschema.Join(joined, append(g.optCounted(m), shardschema.Member{Name: name, Table: r.After}))
	if err != nil {
		return conflict(err.Error(), false)
	}
	if joined == nil {
		// The group's first decision: the target was created with this
		// schema (by the load unit or before the task).
		v.Model, r.State = r.After, OptApplied
		v.Report = &r
		return []clientv3.Op{mustJSONOp(kv.key, v),
			mustJSONOp(g.optJoinedKey(), OptJoinedValue{Version: 1, Model: next})}, what + ": the group's first schema"
	}
	changes, err := shardschema.Diff(joined, next, g.target.Schema, g.target.Name)
	if err != nil {
		return conflict(err.Error(), true)
	}
	v.Dropped = droppedAfter(v.Dropped, modelOr(v.Model, r.Before), r.After, next)
	v.Model, r.State = r.After, OptApplied
	ops := []clientv3.Op{}
	if len(changes) > 0 {
		r.Exec = version + 1
		ops = append(ops, g.optExecOps(m, version+1, shardschema.Statements(changes), joined, next, "the DDL of "+name)...)
		what += fmt.Sprintf(": target change %d", version+1)
	} else {
		what += ": nothing to run"
	}
	v.Report = &r
	return append(ops, mustJSONOp(kv.key, v)), what
}

// optExecOps write the target change and the joined schema it leads to.
func (g *group) optExecOps(owner Member, version int64, ddls []string, from, to *sqlschema.Table, cause string) []clientv3.Op {
	return []clientv3.Op{
		mustJSONOp(g.optExecKey(), OptExecValue{Version: version, Owner: owner, DDLs: ddls, From: from, To: to, Cause: cause}),
		mustJSONOp(g.optJoinedKey(), OptJoinedValue{Version: version, Model: to}),
	}
}

func modelOr(a, b *sqlschema.Table) *sqlschema.Table {
	if a != nil {
		return a
	}
	return b
}

// droppedAfter is the Dropped list of a table whose schema goes from prev
// to post while the target gets joined: the columns it dropped (now or
// before) that the target keeps.
func droppedAfter(dropped []string, prev, post, joined *sqlschema.Table) []string {
	var out []string
	keep := func(c string) {
		if joined.ColumnIndex(c) >= 0 && post.ColumnIndex(c) < 0 && !containsFold(out, c) {
			out = append(out, c)
		}
	}
	for _, c := range dropped {
		keep(c)
	}
	if prev != nil {
		for _, c := range prev.Columns {
			keep(c.Name)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// optConverge applies the conflicting changes that wait, once every member
// followed them.
func (g *group) optConverge() ([]clientv3.Op, string) {
	pend := g.optPending()
	if len(pend) == 0 {
		return nil, ""
	}
	joined, version := g.optJoinedNow()
	var pendings []shardschema.Pending
	var finals []shardschema.Member
	for _, m := range g.members() {
		kv, ok := g.optTables[m]
		switch {
		case !ok:
		case slices.Contains(pend, m):
			pendings = append(pendings, pendingOf(m, kv.v.Report))
			finals = append(finals, shardschema.Member{Name: m.String(), Table: kv.v.Report.After})
		case kv.v.Model != nil:
			finals = append(finals, shardschema.Member{Name: m.String(), Table: kv.v.Model})
		}
	}
	next, wait := shardschema.Converged(joined, pendings, finals)
	if next == nil {
		_ = wait // the conflict messages stay; the next change of the group tries again
		return nil, ""
	}
	owner := pend[0]
	for _, m := range pend[1:] {
		if g.optTables[m].rev > g.optTables[owner].rev {
			owner = m
		}
	}
	or := g.optTables[owner].v.Report
	var ddls []string
	if joined != nil && or.Before != nil && shardschema.Equal(joined, or.Before) && shardschema.Equal(next, or.After) {
		ddls = or.DDLs // the owner's own statements do it (a rename, which no diff can write)
	} else if joined != nil {
		changes, err := shardschema.Diff(joined, next, g.target.Schema, g.target.Name)
		if err != nil {
			var ops []clientv3.Op
			for _, m := range pend {
				kv := g.optTables[m]
				v := kv.v
				r := *v.Report
				r.Hard = true
				r.Conflict += "; the tables converged but " + err.Error()
				v.Report = &r
				ops = append(ops, mustJSONOp(kv.key, v))
			}
			return ops, "converged conflicts the target cannot follow"
		}
		ddls = shardschema.Statements(changes)
	}
	var ops []clientv3.Op
	for _, m := range pend {
		kv := g.optTables[m]
		v := kv.v
		r := *v.Report
		r.State, r.Conflict, r.Exec = OptConverged, "", 0
		if len(ddls) > 0 {
			r.Exec = version + 1
		}
		v.Model = r.After
		v.Report = &r
		ops = append(ops, mustJSONOp(kv.key, v))
	}
	if len(ddls) == 0 {
		if joined == nil {
			ops = append(ops, mustJSONOp(g.optJoinedKey(), OptJoinedValue{Version: 1, Model: next}))
		}
		return ops, fmt.Sprintf("%d conflicting change(s) converged: nothing to run", len(pend))
	}
	ops = append(ops, g.optExecOps(owner, version+1, ddls, joined, next,
		fmt.Sprintf("%d conflicting change(s) every table made", len(pend)))...)
	return ops, fmt.Sprintf("%d conflicting change(s) converged: target change %d by %s", len(pend), version+1, owner)
}

// optRejoin brings the joined schema to the join of the members when they
// differ (a table left the group).
func (g *group) optRejoin(actor string) ([]clientv3.Op, string) {
	joined, version := g.optJoinedNow()
	counted := g.optCounted(Member{})
	if joined == nil || len(counted) == 0 {
		return nil, ""
	}
	next, err := shardschema.Join(joined, counted)
	if err != nil {
		return nil, "" // cannot happen with counted schemas only; nothing to decide
	}
	changes, err := shardschema.Diff(joined, next, g.target.Schema, g.target.Name)
	if err != nil || len(changes) == 0 {
		return nil, ""
	}
	var owner Member
	found := false
	for _, m := range g.members() {
		if kv, ok := g.optTables[m]; ok && kv.v.Model != nil && (!found || (m.Source == actor && owner.Source != actor)) {
			owner, found = m, true
		}
	}
	return g.optExecOps(owner, version+1, shardschema.Statements(changes), joined, next, "the members' join changed (a table left the group)"),
		fmt.Sprintf("the members' join changed: target change %d by %s", version+1, owner)
}

// optConflictMessage names the table, its statements and location, the
// reason, the other tables the reason names with their last statements,
// and what resolves it.
func (g *group) optConflictMessage(m Member, r *OptReportValue, reason string, also []string) string {
	var b strings.Builder
	id := LockID(g.task, g.target)
	if len(r.DDLs) == 0 {
		fmt.Fprintf(&b, "lock %s: %s joined the group with a schema that conflicts: %s", id, m, reason)
	} else {
		fmt.Fprintf(&b, "lock %s: %s reached %s (seq %d, at %s), which conflicts: %s", id, m, quoteDDLs(r.DDLs), r.Seq, r.Location, reason)
	}
	for _, o := range g.members() {
		if o == m || !strings.Contains(reason+strings.Join(also, ""), o.String()) {
			continue
		}
		if or := g.optTables[o].v.Report; or != nil && len(or.DDLs) > 0 {
			fmt.Fprintf(&b, "; %s last reached %s (seq %d, at %s)", o, quoteDDLs(or.DDLs), or.Seq, or.Location)
		} else {
			fmt.Fprintf(&b, "; %s has had this schema since it joined the group", o)
		}
	}
	for _, a := range also {
		b.WriteString("; ")
		b.WriteString(a)
	}
	switch {
	case r.Strict:
		b.WriteString("; strict-optimistic-shard-mode: nothing was applied; replace or skip the DDL (task handle-error) " +
			"or remove it with shard-ddl-lock unlock --force-remove")
	case r.Hard:
		b.WriteString("; waiting for the other tables cannot resolve it: nothing was applied; replace or skip the DDL " +
			"(task handle-error) or remove it with shard-ddl-lock unlock --force-remove")
	default:
		b.WriteString("; nothing was applied: the table waits for every table to make the same change " +
			"(or for task handle-error / shard-ddl-lock unlock --force-remove)")
	}
	return b.String()
}

// optState is m's view of the optimistic group.
func (g *group) optState(m Member) OptState {
	st := OptState{ID: LockID(g.task, g.target), Role: RoleNone}
	kv, ok := g.optTables[m]
	var r *OptReportValue
	if ok {
		r = kv.v.Report
	}
	if r != nil && len(r.DDLs) > 0 {
		st.Seq, st.DDLs = r.Seq, r.DDLs
	}
	e := g.optExec
	if e != nil {
		owner := e.v.Owner
		st.Owner = &owner
		if owner == m {
			st.Role, st.Run, st.Version, st.From, st.To = RoleOwner, e.v.DDLs, e.v.Version, e.v.From, e.v.To
			if e.v.Executing {
				st.Role = RoleOwnerPending
			}
			return st
		}
	}
	if r == nil {
		return st
	}
	switch {
	case r.State == OptNew:
		st.Role = RoleWaiting
		if e != nil {
			st.WaitingFor = []Member{e.v.Owner}
		}
	case r.State == OptConflict:
		st.Role, st.Conflict, st.Wait = RoleConflict, r.Conflict, !r.Hard
	case e != nil && r.Exec == e.v.Version:
		st.Role, st.WaitingFor = RoleWaiting, []Member{e.v.Owner}
	default:
		st.Role, st.Resolved = RoleResolved, r.State
	}
	return st
}
