package shardddl

import (
	"fmt"
	"slices"
	"strings"
)

// Role is what a member table's worker must do about its DDL.
type Role string

// Roles of a table (LockState.Role).
const (
	// RoleNone: the table has no info (it reported no DDL).
	RoleNone Role = "none"
	// RoleWaiting: the table's DDL waits: for the members in WaitingFor to
	// reach it, for the owner to run it, or for the previous lock of the
	// group to be acknowledged. Keep the table's later DML held.
	RoleWaiting Role = "waiting"
	// RoleConflict: members reached different DDLs (LockState.Conflict
	// names both tables and both statements). The lock is not decided until
	// the differing info is replaced (handle-error) or the lock unlocked.
	RoleConflict Role = "conflict"
	// RoleOwner: the lock is decided and this table runs its DDLs: call
	// Begin, run them on the target, then Done.
	RoleOwner Role = "owner"
	// RoleOwnerPending: this table owns the lock and Begin was recorded but
	// Done was not: its worker was about to run the DDLs, or ran them and
	// stopped before Done. Nothing in etcd tells which: the caller must
	// check the target (does it already have the change?) and run the DDLs
	// only if it does not, then call Done.
	RoleOwnerPending Role = "owner-pending"
	// RoleSkip: the owner ran the DDLs, or an unlock resolved them
	// (LockState.Resolved says how); skip them on the target and Ack.
	RoleSkip Role = "skip"
	// RoleResolved: the table's DDL is resolved (LockState.Resolved says
	// how); nothing is left to do for it but go on past it. A table that
	// reports the same DDL at the same location again (a replay after a
	// restart) gets this, as does one whose lock an unlock resolved.
	RoleResolved Role = "resolved"
)

// LockState is a member table's view of its lock.
type LockState struct {
	ID       string   `json:"id"`
	Role     Role     `json:"role"`
	Seq      int64    `json:"seq,omitempty"`
	DDLs     []string `json:"ddls,omitempty"`
	Owner    *Member  `json:"owner,omitempty"`
	Resolved string   `json:"resolved,omitempty"`
	Conflict string   `json:"conflict,omitempty"`
	// WaitingFor are the members whose step the table waits for.
	WaitingFor []Member `json:"waiting-for,omitempty"`
	// Differs (role conflict): the table's DDLs differ from those of the
	// member that reached its DDL first (Owner): it is the one to replace.
	Differs bool `json:"differs,omitempty"`
	// Location is where the table reached the DDL of its info: a report
	// of an earlier location is a replay of a DDL resolved before.
	Location Location `json:"location,omitempty"`
}

// pending is the undecided lock of a group: the unresolved infos of its
// members, the first of them (the prospective owner), the members without
// one, and the conflict if two of them differ.
type pending struct {
	synced   []Member // by the mod revision of their info, then by name
	unsynced []Member // sorted
	first    *infoKV
	owner    Member
	conflict string
	// skipping are members whose unresolved info an unlock resolved and
	// that have not acknowledged it yet: the group waits for their Ack
	// before it decides again.
	skipping []Member
}

// analyze computes the undecided lock of g (g.lock == nil).
func (g *group) analyze() pending {
	var p pending
	for _, m := range g.members() {
		i, ok := g.infos[m]
		if !ok || i.v.Resolved != "" {
			p.unsynced = append(p.unsynced, m)
			continue
		}
		if _, ok := g.skipAt(m, i.v.Seq); ok {
			p.skipping = append(p.skipping, m)
			continue
		}
		p.synced = append(p.synced, m)
	}
	slices.SortFunc(p.synced, func(a, b Member) int {
		if d := g.infos[a].rev - g.infos[b].rev; d != 0 {
			return int(max(min(d, 1), -1))
		}
		return a.compare(b)
	})
	if len(p.synced) == 0 {
		return p
	}
	p.owner = p.synced[0]
	first := g.infos[p.owner]
	p.first = &first
	for _, m := range p.synced[1:] {
		if i := g.infos[m]; !slices.Equal(i.v.DDLs, first.v.DDLs) {
			p.conflict = conflictMessage(g, p.owner, first, m, i)
			break
		}
	}
	return p
}

// ready is true when every member reached the same DDLs.
func (p pending) ready() bool {
	return len(p.synced) > 0 && len(p.unsynced) == 0 && len(p.skipping) == 0 && p.conflict == ""
}

// conflictMessage names both tables and both statements.
func conflictMessage(g *group, a Member, ai infoKV, b Member, bi infoKV) string {
	return fmt.Sprintf("lock %s: %s reached %s (seq %d, at %s) but %s reached %s (seq %d, at %s); "+
		"every member must reach the same DDLs: replace the differing one (task handle-error TASK replace --source S --sql ...) "+
		"or remove the lock with shard-ddl-lock unlock --force-remove (nobody runs the DDLs)",
		LockID(g.task, g.target), a, quoteDDLs(ai.v.DDLs), ai.v.Seq, ai.v.Location,
		b, quoteDDLs(bi.v.DDLs), bi.v.Seq, bi.v.Location)
}

func quoteDDLs(ddls []string) string {
	q := make([]string, len(ddls))
	for i, d := range ddls {
		q[i] = fmt.Sprintf("%q", d)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// state is m's view of g.
func (g *group) state(m Member) LockState {
	st := LockState{ID: LockID(g.task, g.target), Role: RoleNone}
	i, ok := g.infos[m]
	if !ok {
		return st
	}
	st.Seq, st.DDLs, st.Location = i.v.Seq, i.v.DDLs, i.v.Location
	if i.v.Resolved != "" {
		st.Role, st.Resolved = RoleResolved, i.v.Resolved
		return st
	}
	if sk, ok := g.skipAt(m, i.v.Seq); ok {
		if !slices.Equal(sk.DDLs, i.v.DDLs) {
			st.Role = RoleConflict
			st.Conflict = fmt.Sprintf("lock %s: shard-ddl-lock unlock resolved %s (%s) for %s at seq %d, but it reached %s; "+
				"replace its DDL by the unlocked one (task handle-error ... replace) or skip it (task handle-error ... skip)",
				st.ID, quoteDDLs(sk.DDLs), sk.How, m, sk.Seq, quoteDDLs(i.v.DDLs))
			return st
		}
		st.Role, st.Resolved = RoleSkip, sk.How
		return st
	}
	if g.lock != nil {
		return g.lockState(st, m)
	}
	p := g.analyze()
	owner := p.owner
	st.Owner = &owner
	switch {
	case p.conflict != "":
		st.Role, st.Conflict = RoleConflict, p.conflict
		st.Differs = p.first != nil && !slices.Equal(i.v.DDLs, p.first.v.DDLs)
	default:
		st.Role, st.WaitingFor = RoleWaiting, p.unsynced
	}
	return st
}

// lockState is the state of m, which has an unresolved info, under the
// group's decided lock.
func (g *group) lockState(st LockState, m Member) LockState {
	l := &g.lock.v
	owner := l.Owner
	st.Owner = &owner
	seat, seated := l.seat(m)
	if !seated || seat.Seq != st.Seq {
		// The table reached its next DDL while the previous lock waits for
		// the acknowledgements of other members.
		st.Role = RoleWaiting
		for _, s := range l.Members {
			if _, ok := l.acked(s.Member); !ok {
				st.WaitingFor = append(st.WaitingFor, s.Member)
			}
		}
		return st
	}
	st.DDLs = l.DDLs
	if a, ok := l.acked(m); ok {
		st.Role, st.Resolved = RoleResolved, a.How
		return st
	}
	switch {
	case m == l.Owner && l.Executing:
		st.Role = RoleOwnerPending
	case m == l.Owner:
		st.Role = RoleOwner
	case l.Done:
		st.Role = RoleSkip
	default:
		st.Role, st.WaitingFor = RoleWaiting, []Member{l.Owner}
	}
	return st
}
