package shardddl

import (
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Optimistic mode (shard-mode: optimistic) keeps its state in the opt/
// keys of the group, next to the shares it has in common with pessimistic
// mode (docs/design.md, "Optimistic shard DDL"):
//
//	opt/table/{source}/{schema}/{table}  OptTableValue: a member's schema and its last DDL
//	opt/joined                           OptJoinedValue: the joined schema the target has
//	opt/exec                             OptExecValue: the change the target is to get, and who runs it

// States of an optimistic report (OptReportValue.State).
const (
	// OptNew: reported, not decided yet (decided in report order once no
	// change is outstanding on the target).
	OptNew = "new"
	// OptConflict: the change conflicts (OptReportValue.Conflict says why);
	// it is not part of the join. Hard: it waits for the operator
	// (strict mode, or no convergence can resolve it); else it waits for
	// the other members to make the same change.
	OptConflict = "conflict"
	// OptApplied: decided; the target gets what the change adds to the
	// join (possibly nothing).
	OptApplied = "applied"
	// OptExecuted: the table's worker ran the decided statements.
	OptExecuted = "executed"
	// OptConverged: a conflicting change that every member made; decided
	// with the others'.
	OptConverged = "converged"
	// OptForceRemoved: `shard-ddl-lock unlock --force-remove` dropped the
	// change: the table counts with its schema before it and its worker
	// skips the DDL.
	OptForceRemoved = "force-removed"
)

// OptTableValue is the value of opt/table/{source}/{schema}/{table}.
type OptTableValue struct {
	// Model is the table's schema as the join counts it: its schema after
	// its last decided DDL, before a DDL held at a conflict. nil until the
	// table's first report or share is decided.
	Model *sqlschema.Table `json:"model,omitempty"`
	// Dropped are the columns the table dropped while the target kept them
	// for other members; adding one back before the target dropped it is a
	// conflict (its old values and new ones would mix on the target).
	Dropped []string `json:"dropped,omitempty"`
	// Report is the table's last DDL (or its schema at share, DDLs empty).
	Report *OptReportValue `json:"report,omitempty"`
}

// OptReportValue is one member's DDL in optimistic mode.
type OptReportValue struct {
	Seq      int64    `json:"seq"`
	DDLs     []string `json:"ddls,omitempty"`
	Location Location `json:"location"`
	// Before is nil for a table that joined the group (share) with After.
	Before *sqlschema.Table `json:"before,omitempty"`
	After  *sqlschema.Table `json:"after"`
	Strict bool             `json:"strict,omitempty"`
	State  string           `json:"state"`
	// Conflict names the tables and statements; Hard: waiting cannot
	// resolve it.
	Conflict string `json:"conflict,omitempty"`
	Hard     bool   `json:"hard,omitempty"`
	// Exec is the version of the target change the table waits for before
	// it goes on past the DDL (0: none).
	Exec int64 `json:"exec,omitempty"`
}

// OptJoinedValue is the value of opt/joined: the joined schema of the
// members the target has (or gets with the outstanding opt/exec), and its
// version, counted from 1 with every change.
type OptJoinedValue struct {
	Version int64            `json:"version"`
	Model   *sqlschema.Table `json:"model"`
	// ConvergeRev is set while the conflicting changes that converged at
	// this version are applied to more members than one transaction
	// holds: every member held at a conflict whose key's mod revision is
	// at most ConvergeRev (the revision the convergence was decided from)
	// is part of it, and is applied before any other decision.
	ConvergeRev int64 `json:"converge-rev,omitempty"`
}

// OptExecValue is the value of opt/exec: the change of the target to
// version Version, from the joined schema From to To, by the statements
// DDLs, run by the worker of Owner. It exists from the decision until the
// owner's DoneOptimistic; Executing is set by BeginOptimistic.
type OptExecValue struct {
	Version   int64            `json:"version"`
	Owner     Member           `json:"owner"`
	DDLs      []string         `json:"ddls"`
	From      *sqlschema.Table `json:"from"`
	To        *sqlschema.Table `json:"to"`
	Executing bool             `json:"executing,omitempty"`
	// Cause says what made the change: a member's DDL, a member leaving,
	// conflicting changes that converged.
	Cause string `json:"cause"`
}

// OptReport is one member table's DDL in optimistic mode: the statements,
// rewritten for the target table, the table's schema before and after them
// (as the sync unit's schema tracker has it) and the binlog location of the
// DDL. Strict is the task's strict-optimistic-shard-mode. Report one
// statement at a time: a statement that adds one column and drops another
// reads as a rename and is a conflict, as in DM.
type OptReport struct {
	Target        Table
	Table         Table
	DDLs          []string
	Before, After *sqlschema.Table
	Location      Location
	Strict        bool
}

// OptState is a member table's view of the optimistic lock: what its
// worker does about its last DDL.
//
//   - RoleNone: the table reported nothing.
//   - RoleWaiting: hold the table's DML past the DDL: its change waits for
//     the outstanding target change of WaitingFor (or for its decision).
//   - RoleConflict: the DDL conflicts (Conflict names the tables and the
//     statements); nothing was applied. Wait true (non-strict mode, and
//     other members may still make the same change): hold the table and
//     WaitOptimistic; false: pause the task with the non-resumable
//     shard-ddl-conflict error until the operator replaces or skips the
//     DDL (task handle-error, which reports again) or runs shard-ddl-lock
//     unlock --force-remove.
//   - RoleOwner: run Run on the target (BeginOptimistic before,
//     DoneOptimistic after); From and To are the joined schema before and
//     after Run.
//   - RoleOwnerPending: BeginOptimistic was recorded but not
//     DoneOptimistic: the statements may have run. Read the target and run
//     only shardschema.Remaining(From, To, target), then DoneOptimistic.
//   - RoleResolved: go on past the DDL (Resolved says how; "applied" with
//     nothing to run means the target needs no change for it: skip it).
type OptState struct {
	ID   string   `json:"id"`
	Role Role     `json:"role"`
	Seq  int64    `json:"seq,omitempty"`
	DDLs []string `json:"ddls,omitempty"`
	Run  []string `json:"run,omitempty"`
	// Version is the target change Run brings the target to; pass it to
	// BeginOptimistic and DoneOptimistic.
	Version    int64            `json:"version,omitempty"`
	From       *sqlschema.Table `json:"-"`
	To         *sqlschema.Table `json:"-"`
	Conflict   string           `json:"conflict,omitempty"`
	Wait       bool             `json:"wait,omitempty"`
	Resolved   string           `json:"resolved,omitempty"`
	Owner      *Member          `json:"owner,omitempty"`
	WaitingFor []Member         `json:"waiting-for,omitempty"`
	// Location is where the table reached its last reported DDL (zero
	// before its first): a report of an earlier location is a replay of a
	// DDL decided before.
	Location Location `json:"location,omitempty"`
}

// ModeOptimistic is LockInfo.Mode of an optimistic group.
const ModeOptimistic = "optimistic"

// LockUnsynced is the state of an optimistic lock whose members' schemas
// differ (some made a change the others have not) with nothing else
// outstanding: the target has their join. Optimistic locks are also
// LockWaiting (a DDL not decided yet), LockConflict, LockDecided and
// LockExecuting (a target change decided, begun). A group whose members
// all have the joined schema and nothing outstanding is no lock.
const LockUnsynced = "unsynced"

type optTableKV struct {
	key string
	rev int64
	v   OptTableValue
}

type optJoinedKV struct {
	key string
	rev int64
	v   OptJoinedValue
}

type optExecKV struct {
	key string
	rev int64
	v   OptExecValue
}
