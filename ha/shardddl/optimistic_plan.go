package shardddl

import (
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dmworker/dm-worker/pkg/shardschema"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// optPlan is the next decision of an optimistic group, as the operations
// of one transaction (to be guarded by the whole group as read), and what
// it is; no operations when nothing is decidable. In order:
//
//  0. A convergence applied in steps (OptJoinedValue.ConvergeRev) goes on.
//  1. While a target change is outstanding (opt/exec), nothing: every
//     decision is based on the joined schema the target will have, and
//     the tables whose DML needs the change wait for it anyway.
//  2. The undecided reports in the order of their keys' revisions, each
//     applied (the join changes: a target change owned by the reporting
//     table; or not: nothing to run) or a conflict, as many in one
//     transaction as it holds and up to the first target change (a share
//     of many tables is decided in a few transactions, not one each).
//  3. Conflicting changes that every member followed (shardschema.
//     Converged): all applied at once, the latest of them owning the
//     target change.
//  4. The join of the members differs from the joined schema (a table
//     left): a target change owned by a table of actor, else the first.
func (g *group) optPlan(k keys, actor string) ([]clientv3.Op, string) {
	if j := g.optJoined; j != nil && j.v.ConvergeRev > 0 {
		return g.optConvergeRest()
	}
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
		return g.optDecideBatch(k, news)
	}
	if ops, what := g.optConverge(); len(ops) > 0 {
		return ops, what
	}
	return g.optRejoin(actor)
}

// optDecideBatch decides news in order, each from the group as the
// decisions before it left it (applied to g in memory), until one makes a
// target change or the transaction is full. The operations put each key
// once (etcd refuses a key twice in a transaction).
func (g *group) optDecideBatch(k keys, news []Member) ([]clientv3.Op, string) {
	var ops []clientv3.Op
	var whats []string
	for _, m := range news {
		step, what := g.optDecide(m)
		ops, whats = append(ops, step...), append(whats, what)
		if err := g.applyPuts(k, step); err != nil || g.optExec != nil || len(ops) >= maxOptPutsPerTxn {
			break
		}
	}
	last := map[string]int{}
	for i, op := range ops {
		last[string(op.KeyBytes())] = i
	}
	out := ops[:0:0]
	for i, op := range ops {
		if last[string(op.KeyBytes())] == i {
			out = append(out, op)
		}
	}
	if len(whats) == 1 {
		return out, whats[0]
	}
	return out, fmt.Sprintf("%d decisions, the first: %s; the last: %s", len(whats), whats[0], whats[len(whats)-1])
}

// applyPuts makes g what it would read after the puts, an opt/table key
// keeping the revision it had (the order of the undecided reports).
func (g *group) applyPuts(k keys, ops []clientv3.Op) error {
	for _, op := range ops {
		if !op.IsPut() {
			continue
		}
		key := string(op.KeyBytes())
		gk, err := k.parse(key)
		if err != nil {
			return err
		}
		var rev int64
		if gk.Kind == kindOptTable {
			rev = g.optTables[Member{Source: gk.Source, Table: gk.Table}].rev
		}
		if err := g.add(k, &mvccpb.KeyValue{Key: op.KeyBytes(), Value: op.ValueBytes(), ModRevision: rev}); err != nil {
			return err
		}
	}
	return nil
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
	// The owner first, then as many others as one transaction holds; the
	// rest follow (optConvergeRest) before any other decision.
	pend = append([]Member{owner}, slices.DeleteFunc(slices.Clone(pend), func(m Member) bool { return m == owner })...)
	exec := int64(0)
	if len(ddls) > 0 {
		exec = version + 1
	}
	ops := g.optConvertOps(pend[:min(len(pend), maxOptPutsPerTxn)], exec)
	var convergeRev int64
	if len(pend) > maxOptPutsPerTxn {
		convergeRev = g.rev
	}
	what := fmt.Sprintf("%d conflicting change(s) converged", len(pend))
	switch {
	case len(ddls) > 0:
		ops = append(ops, mustJSONOp(g.optExecKey(), OptExecValue{Version: version + 1, Owner: owner, DDLs: ddls, From: joined, To: next,
			Cause: fmt.Sprintf("%d conflicting change(s) every table made", len(pend))}))
		ops = append(ops, mustJSONOp(g.optJoinedKey(), OptJoinedValue{Version: version + 1, Model: next, ConvergeRev: convergeRev}))
		what += fmt.Sprintf(": target change %d by %s", version+1, owner)
	case joined == nil || convergeRev > 0:
		ops = append(ops, mustJSONOp(g.optJoinedKey(), OptJoinedValue{Version: max(version, 1), Model: next, ConvergeRev: convergeRev}))
		what += ": nothing to run"
	default:
		what += ": nothing to run"
	}
	return ops, what
}

// optConvertOps apply the converged changes of members: each counts with
// its schema after the DDL and waits for change exec (0: none).
func (g *group) optConvertOps(members []Member, exec int64) []clientv3.Op {
	var ops []clientv3.Op
	for _, m := range members {
		kv := g.optTables[m]
		v := kv.v
		r := *v.Report
		r.State, r.Conflict, r.Exec = OptConverged, "", exec
		v.Model = r.After
		v.Report = &r
		ops = append(ops, mustJSONOp(kv.key, v))
	}
	return ops
}

// optConvergeRest applies the next members of a convergence decided at
// opt/joined's ConvergeRev, and clears it with the last of them.
func (g *group) optConvergeRest() ([]clientv3.Op, string) {
	j := g.optJoined.v
	var rest []Member
	for _, m := range g.optPending() {
		if g.optTables[m].rev <= j.ConvergeRev {
			rest = append(rest, m)
		}
	}
	exec := int64(0)
	if e := g.optExec; e != nil && e.v.Version == j.Version {
		exec = j.Version
	}
	n := min(len(rest), maxOptPutsPerTxn-1)
	ops := g.optConvertOps(rest[:n], exec)
	if n == len(rest) {
		j.ConvergeRev = 0
		ops = append(ops, mustJSONOp(g.optJoinedKey(), j))
	}
	return ops, fmt.Sprintf("apply the convergence of change %d to %d more table(s)", j.Version, n)
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
		st.Seq, st.DDLs, st.Location = r.Seq, r.DDLs, r.Location
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
