package shardddl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Table names a table: an upstream table of a share or the target table of
// a group.
type Table struct {
	Schema string `json:"schema"`
	Name   string `json:"table"`
}

// String is the quoted `schema`.`table`.
func (t Table) String() string { return sqlschema.QuoteTable(t.Schema, t.Name) }

func (t Table) compare(o Table) int {
	if c := strings.Compare(t.Schema, o.Schema); c != 0 {
		return c
	}
	return strings.Compare(t.Name, o.Name)
}

// Member is one upstream table of a sharding group: a table of a source.
type Member struct {
	Source string `json:"source"`
	Table
}

// String is "source `schema`.`table`", as errors and logs name a member.
func (m Member) String() string { return m.Source + " " + m.Table.String() }

func (m Member) compare(o Member) int {
	if c := strings.Compare(m.Source, o.Source); c != 0 {
		return c
	}
	return m.Table.compare(o.Table)
}

// Location is the binlog location of a DDL in the source's coordinates.
type Location struct {
	Name string `json:"binlog-name,omitempty"`
	Pos  uint32 `json:"binlog-pos,omitempty"`
	GTID string `json:"binlog-gtid,omitempty"`
}

// Before reports whether l is an earlier point of the same source's binlog
// than o (both with a file name).
func (l Location) Before(o Location) bool {
	if l.Name == "" || o.Name == "" {
		return false
	}
	return binlog.Location{Name: l.Name, Pos: l.Pos}.Compare(binlog.Location{Name: o.Name, Pos: o.Pos}) < 0
}

// String is "file:pos" with the GTID set after it when known.
func (l Location) String() string {
	s := fmt.Sprintf("%s:%d", l.Name, l.Pos)
	if l.GTID != "" {
		s += " (" + l.GTID + ")"
	}
	return s
}

// ShareValue is the value of P/shardddl/{task}/{target}/share/{source}: the
// upstream tables of the source routed to the target table, sorted.
type ShareValue struct {
	Tables []Table `json:"tables"`
}

// Resolutions of an info (InfoValue.Resolved).
const (
	// ResolvedExecuted: the table owned the lock and its worker ran the DDL.
	ResolvedExecuted = "executed"
	// ResolvedSkipped: the owner ran the DDL; this table skipped it.
	ResolvedSkipped = "skipped"
	// ResolvedUnlocked: `shard-ddl-lock unlock` resolved the lock before the
	// table reached the DDL; the table skips it when it does.
	ResolvedUnlocked = "unlocked"
	// ResolvedForceRemoved: `shard-ddl-lock unlock --force-remove` removed
	// the lock; nobody ran the DDL, the table skips it.
	ResolvedForceRemoved = "force-removed"
	// ResolvedDropped (acknowledgements only): the table left the group
	// (PutShare without it) before it acknowledged.
	ResolvedDropped = "dropped"
)

// InfoValue is the value of P/shardddl/{task}/{target}/info/{source}/{schema}/{table}:
// the last DDL the upstream table reached. Seq counts the table's DDLs
// (1 for its first): a DDL the table reaches after its previous one was
// resolved gets the next number, so back-to-back DDLs are successive locks.
// Resolved is "" while the DDL waits for its lock, else how it was resolved.
type InfoValue struct {
	Seq      int64    `json:"seq"`
	DDLs     []string `json:"ddls"`
	Location Location `json:"location"`
	Resolved string   `json:"resolved,omitempty"`
}

// Ack is one member's acknowledgement of a decided lock.
type Ack struct {
	Member
	How string `json:"how"` // a Resolved* constant
}

// LockValue is the value of P/shardddl/{task}/{target}/lock: the decision
// of the group's current lock. It exists from the decision until every
// member acknowledged. Members are the tables the decision waited for (each
// with the Seq of its info), sorted; Owner is the one of them that runs the
// DDLs; Executing is set just before the owner runs them, Done when they
// ran; Acks lists the members that acknowledged.
type LockValue struct {
	ID        string   `json:"id"`
	Owner     Member   `json:"owner"`
	DDLs      []string `json:"ddls"`
	Members   []Seat   `json:"members"`
	Executing bool     `json:"executing,omitempty"`
	Done      bool     `json:"done,omitempty"`
	Acks      []Ack    `json:"acks,omitempty"`
	// Unlock records the `shard-ddl-lock unlock` that made or changed this
	// decision: the owner source it named ("" for the default).
	Unlock *UnlockRecord `json:"unlock,omitempty"`
}

// UnlockValue is the value of P/shardddl/{task}/{target}/unlock: what
// `shard-ddl-lock unlock` resolved for members that have not acknowledged
// it yet. Each skip is consumed (removed, and the key deleted with the last
// one) by the member's Ack.
type UnlockValue struct {
	Skips []Skip `json:"skips"`
}

// Skip tells a member to skip the DDLs of its info at Seq: How is
// ResolvedUnlocked (the lock was unlocked before the table reached them; an
// owner runs them) or ResolvedForceRemoved (nobody runs them).
type Skip struct {
	Member
	Seq  int64    `json:"seq"`
	DDLs []string `json:"ddls"`
	How  string   `json:"how"`
}

// skipAt returns the skip of m for its DDL at seq, if any.
func (u *UnlockValue) skipAt(m Member, seq int64) (Skip, bool) {
	for _, s := range u.Skips {
		if s.Member == m && s.Seq == seq {
			return s, true
		}
	}
	return Skip{}, false
}

// Seat is a member of a decided lock and the seq of its info the lock is for.
type Seat struct {
	Member
	Seq int64 `json:"seq"`
}

// UnlockRecord is what an operator's unlock asked for.
type UnlockRecord struct {
	Owner string `json:"owner,omitempty"`
}

// acked returns the ack of m, if any.
func (l *LockValue) acked(m Member) (Ack, bool) {
	for _, a := range l.Acks {
		if a.Member == m {
			return a, true
		}
	}
	return Ack{}, false
}

// seat returns the seat of m, if m is a member.
func (l *LockValue) seat(m Member) (Seat, bool) {
	for _, s := range l.Members {
		if s.Member == m {
			return s, true
		}
	}
	return Seat{}, false
}

// complete is true when every member acknowledged.
func (l *LockValue) complete() bool {
	for _, s := range l.Members {
		if _, ok := l.acked(s.Member); !ok {
			return false
		}
	}
	return true
}

// LockID is the lock id of DESIGN.md §5: <task>-`<db>`.`<table>`.
func LockID(task string, target Table) string { return task + lockIDSep + target.String() }

// ParseLockID splits a lock id into its task and target table.
func ParseLockID(id string) (task string, target Table, err error) {
	task, quoted, ok := strings.Cut(id, lockIDSep+"`")
	if !ok {
		return "", Table{}, fmt.Errorf("%w: %q is not <task>-`<db>`.`<table>`", ErrBadLockID, id)
	}
	names, ok := unquoteNames("`" + quoted)
	if !ok || len(names) != 2 {
		return "", Table{}, fmt.Errorf("%w: %q is not <task>-`<db>`.`<table>`", ErrBadLockID, id)
	}
	if err := config.ValidateName("task", task); err != nil {
		return "", Table{}, fmt.Errorf("%w: %q: %w", ErrBadLockID, id, err)
	}
	return task, Table{Schema: names[0], Name: names[1]}, nil
}

// unquoteNames parses `a`.`b` (backticks doubled inside names).
func unquoteNames(s string) ([]string, bool) {
	var out []string
	for {
		if !strings.HasPrefix(s, "`") {
			return nil, false
		}
		var b strings.Builder
		i := 1
		for {
			if i >= len(s) {
				return nil, false
			}
			if s[i] == '`' {
				if i+1 < len(s) && s[i+1] == '`' {
					b.WriteByte('`')
					i += 2
					continue
				}
				break
			}
			b.WriteByte(s[i])
			i++
		}
		out = append(out, b.String())
		s = s[i+1:]
		if s == "" {
			return out, true
		}
		if !strings.HasPrefix(s, ".") {
			return nil, false
		}
		s = s[1:]
	}
}

// sortTables sorts and deduplicates tables.
func sortTables(ts []Table) []Table {
	out := slices.Clone(ts)
	slices.SortFunc(out, Table.compare)
	return slices.Compact(out)
}
