package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/ha/shardddl"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Lock ids of shardLocks.
const (
	lockDecided  = "task1-`shard`.`orders`" // both sources reached the DDL: decided, owner mysql-01
	lockConflict = "task1-`shard`.`items`"  // the sources reached different DDLs
	lockStuck    = "task2-`shard`.`users`"  // mysql-02's tables never report
)

const (
	addColumn = "ALTER TABLE `shard`.`orders` ADD COLUMN `c` INT"
	addIndex  = "ALTER TABLE `shard`.`users` ADD INDEX `i` (`c`)"
)

// shardWorker is a fake worker's side of the shard DDL locks: the real
// Coordinator of one task and source, under the harness's prefix.
type shardWorker struct {
	h *harness
	c *shardddl.Coordinator
}

func (h *harness) shardWorker(task, source string) *shardWorker {
	h.t.Helper()
	c, err := shardddl.New(h.cli, testPrefix, task, source, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return &shardWorker{h: h, c: c}
}

func shardTable(schema, name string) shardddl.Table {
	return shardddl.Table{Schema: schema, Name: name}
}

func (w *shardWorker) share(target shardddl.Table, tables ...shardddl.Table) {
	w.h.t.Helper()
	if err := w.c.PutShare(w.h.ctx(), target, tables); err != nil {
		w.h.t.Fatalf("PutShare: %v", err)
	}
}

func (w *shardWorker) report(target, table shardddl.Table, ddl string, pos uint32) shardddl.LockState {
	w.h.t.Helper()
	st, err := w.c.Report(w.h.ctx(), shardddl.Report{Target: target, Table: table, DDLs: []string{ddl},
		Location: shardddl.Location{Name: "mariadb-bin.000001", Pos: pos}})
	if err != nil {
		w.h.t.Fatalf("Report of %s: %v", table, err)
	}
	return st
}

func (w *shardWorker) state(target, table shardddl.Table) shardddl.LockState {
	w.h.t.Helper()
	st, err := w.c.State(w.h.ctx(), target, table)
	if err != nil {
		w.h.t.Fatalf("State of %s: %v", table, err)
	}
	return st
}

func wantShardRole(t *testing.T, what string, st shardddl.LockState, role shardddl.Role, resolved string) {
	t.Helper()
	if st.Role != role || st.Resolved != resolved {
		t.Fatalf("%s: role %s resolved %q, want %s %q (state %+v)", what, st.Role, st.Resolved, role, resolved, st)
	}
}

// shardLocks creates the three locks of the lock* constants with two fake
// workers per task, mysql-01 and mysql-02.
func (h *harness) shardLocks() (w1, w2, v1, v2 *shardWorker) {
	h.t.Helper()
	w1, w2 = h.shardWorker("task1", "mysql-01"), h.shardWorker("task1", "mysql-02")
	orders, items := shardTable("shard", "orders"), shardTable("shard", "items")
	w1.share(orders, shardTable("db1", "orders"))
	w2.share(orders, shardTable("db2", "orders"))
	w1.report(orders, shardTable("db1", "orders"), addColumn, 100)
	if st := w2.report(orders, shardTable("db2", "orders"), addColumn, 200); st.Role != shardddl.RoleWaiting {
		h.t.Fatalf("the decided lock: mysql-02 is %s, want waiting for the owner", st.Role)
	}
	w1.share(items, shardTable("db1", "items"))
	w2.share(items, shardTable("db2", "items"))
	w1.report(items, shardTable("db1", "items"), "ALTER TABLE `shard`.`items` ADD COLUMN `a` INT", 300)
	if st := w2.report(items, shardTable("db2", "items"), "ALTER TABLE `shard`.`items` ADD COLUMN `b` INT", 400); st.Role != shardddl.RoleConflict {
		h.t.Fatalf("the conflicting lock: mysql-02 is %s, want conflict", st.Role)
	}

	v1, v2 = h.shardWorker("task2", "mysql-01"), h.shardWorker("task2", "mysql-02")
	users := shardTable("shard", "users")
	v1.share(users, shardTable("db1", "users"))
	v2.share(users, shardTable("db2", "users"), shardTable("db2", "users_b"))
	if st := v1.report(users, shardTable("db1", "users"), addIndex, 500); st.Role != shardddl.RoleWaiting {
		h.t.Fatalf("the stuck lock: mysql-01 is %s, want waiting", st.Role)
	}
	return w1, w2, v1, v2
}

// lockList runs `shard-ddl-lock [TASK] --output json`, checks that every
// lock has exactly DESIGN.md §5's fields (plus state) and returns them.
func (h *harness) lockList(args ...string) []shardddl.LockInfo {
	h.t.Helper()
	var raw map[string][]map[string]json.RawMessage
	r := h.runJSON(&raw, append([]string{"shard-ddl-lock"}, args...)...)
	if got := slices.Collect(maps.Keys(raw)); len(got) != 1 || got[0] != "locks" {
		h.t.Fatalf("document keys %v, want only locks:\n%s", got, r.stdout)
	}
	want := []string{"conflict", "ddls", "id", "mode", "owner", "state", "synced", "target", "task", "unsynced"}
	for _, l := range raw["locks"] {
		if got := slices.Sorted(maps.Keys(l)); !slices.Equal(got, want) {
			h.t.Errorf("lock fields %v, want %v", got, want)
		}
		for _, k := range []string{"synced", "unsynced"} {
			var ms []map[string]any
			if err := json.Unmarshal(l[k], &ms); err != nil || ms == nil {
				h.t.Errorf("%s is %s, want a list", k, l[k])
			}
			for _, m := range ms {
				if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, []string{"source", "table"}) {
					h.t.Errorf("%s member fields %v, want source, table", k, got)
				}
			}
		}
		if string(l["ddls"]) == "null" {
			h.t.Errorf("ddls is null, want a list")
		}
	}
	var doc shardDDLLockListJSON
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		h.t.Fatal(err)
	}
	return doc.Locks
}

func ids(locks []shardddl.LockInfo) []string {
	out := make([]string, len(locks))
	for i, l := range locks {
		out[i] = l.ID
	}
	return out
}

func members(ms []shardddl.MemberTable) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Source+" "+m.Table)
	}
	return strings.Join(out, ", ")
}

func TestShardDDLLockList(t *testing.T) {
	h := newHarness(t)
	if got := h.lockList(); len(got) != 0 {
		t.Fatalf("no lock yet, listed %v", ids(got))
	}
	if r := h.ok("shard-ddl-lock"); r.stdout != "no shard DDL lock of any task\n" {
		t.Errorf("empty listing: %q", r.stdout)
	}
	h.shardLocks()

	all := h.lockList()
	if got, want := ids(all), []string{lockConflict, lockDecided, lockStuck}; !slices.Equal(got, want) {
		t.Fatalf("locks %v, want %v", got, want)
	}
	conflict, decided, stuck := all[0], all[1], all[2]
	for _, c := range []struct {
		l                          shardddl.LockInfo
		task, target, owner, state string
		ddls, synced, unsynced     string
		conflictWith               []string
	}{
		{decided, "task1", "`shard`.`orders`", "mysql-01", shardddl.LockDecided, addColumn,
			"mysql-01 `db1`.`orders`, mysql-02 `db2`.`orders`", "", nil},
		{conflict, "task1", "`shard`.`items`", "mysql-01", shardddl.LockConflict, "ALTER TABLE `shard`.`items` ADD COLUMN `a` INT",
			"mysql-01 `db1`.`items`, mysql-02 `db2`.`items`", "", []string{"mysql-01 `db1`.`items`", "mysql-02 `db2`.`items`", "ADD COLUMN `b`"}},
		{stuck, "task2", "`shard`.`users`", "mysql-01", shardddl.LockWaiting, addIndex,
			"mysql-01 `db1`.`users`", "mysql-02 `db2`.`users`, mysql-02 `db2`.`users_b`", nil},
	} {
		l := c.l
		if l.Task != c.task || l.Mode != "pessimistic" || l.Target != c.target || l.Owner != c.owner || l.State != c.state ||
			strings.Join(l.DDLs, "; ") != c.ddls || members(l.Synced) != c.synced || members(l.Unsynced) != c.unsynced {
			t.Errorf("lock %s: %+v", l.ID, l)
		}
		if (l.Conflict != "") != (c.conflictWith != nil) {
			t.Errorf("lock %s: conflict %q", l.ID, l.Conflict)
		}
		for _, w := range c.conflictWith {
			if !strings.Contains(l.Conflict, w) {
				t.Errorf("lock %s: conflict %q does not name %q", l.ID, l.Conflict, w)
			}
		}
	}

	if got := ids(h.lockList("task2")); !slices.Equal(got, []string{lockStuck}) {
		t.Errorf("task2: locks %v", got)
	}
	if got := ids(h.lockList("task1")); !slices.Equal(got, []string{lockConflict, lockDecided}) {
		t.Errorf("task1: locks %v", got)
	}
	if got := h.lockList("task3"); len(got) != 0 {
		t.Errorf("task3: locks %v", ids(got))
	}

	text := h.ok("shard-ddl-lock").stdout
	for _, w := range []string{
		"ID  ", "MODE", "TARGET", "OWNER", "STATE", "SYNCED", "UNSYNCED", "DDLS",
		lockDecided, "pessimistic", "decided", addColumn, "waiting", addIndex,
		"LOCK", "MEMBER", "SOURCE", "TABLE",
		"unsynced  mysql-02  `db2`.`users_b`", "synced    mysql-01  `db1`.`users`",
		"conflict: lock " + lockConflict + ": mysql-01 `db1`.`items` reached",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("table lacks %q:\n%s", w, text)
		}
	}
	text = h.ok("shard-ddl-lock", "task2").stdout
	if strings.Contains(text, lockDecided) || !strings.Contains(text, lockStuck) {
		t.Errorf("task2 table:\n%s", text)
	}
	if r := h.ok("shard-ddl-lock", "task3"); r.stdout != "no shard DDL lock of task task3\n" {
		t.Errorf("task3: %q", r.stdout)
	}

	h.fail([]string{"shard-ddl-lock", "bad/task"}, `invalid task name "bad/task"`)
	h.fail([]string{"shard-ddl-lock", "task1", "task2"}, "takes at most one TASK", "usage: dmctl [global flags] shard-ddl-lock [TASK]")
}

func TestShardDDLLockUnlock(t *testing.T) {
	h := newHarness(t)
	w1, w2, v1, v2 := h.shardLocks()
	orders, items, users := shardTable("shard", "orders"), shardTable("shard", "items"), shardTable("shard", "users")

	// Refused: nothing changes in etcd (h.fail checks).
	h.fail([]string{"shard-ddl-lock", "unlock", "nosuch"}, "bad lock id", `"nosuch"`, "dmctl shard-ddl-lock")
	h.fail([]string{"shard-ddl-lock", "unlock", "a/b-`x`.`y`"}, `invalid task name "a/b"`, "dmctl shard-ddl-lock")
	h.fail([]string{"shard-ddl-lock", "unlock", "task1-`no`.`such`"}, "no such lock", "task1-`no`.`such`",
		"list the locks with `dmctl shard-ddl-lock task1`")
	h.fail([]string{"shard-ddl-lock", "unlock"}, "needs LOCK")
	h.fail([]string{"shard-ddl-lock", "unlock", lockStuck, "--owner", "x y"}, `invalid source name "x y"`)
	h.fail([]string{"shard-ddl-lock", "unlock", lockStuck, "--owner", "mysql-01", "--force-remove"}, "exclude each other")
	h.fail([]string{"shard-ddl-lock", "unlock", lockStuck, "--owner", "mysql-02"},
		"source mysql-02 has no member that reached the DDLs of lock "+lockStuck)
	h.fail([]string{"shard-ddl-lock", "unlock", lockConflict}, "different DDLs", lockConflict,
		"`dmctl task handle-error task1 replace --source SOURCE --sql ...`", "resolve the conflict first", "--force-remove")
	h.fail([]string{"shard-ddl-lock", "unlock", lockDecided}, "lock "+lockDecided+" is decided and waits for its owner",
		"name another --owner or use --force-remove")

	// The stuck lock, default owner: decided now with mysql-01's table,
	// which runs the DDL; mysql-02's tables skip it when they reach it.
	var res shardDDLUnlockJSON
	h.runJSON(&res, "shard-ddl-lock", "unlock", lockStuck)
	if res.ID != lockStuck || res.ForceRemove || res.Lock == nil || res.Lock.State != shardddl.LockDecided ||
		res.Lock.Owner != "mysql-01" || members(res.Lock.Unsynced) != "mysql-02 `db2`.`users`, mysql-02 `db2`.`users_b`" {
		t.Fatalf("unlock %s: %+v lock %+v", lockStuck, res, res.Lock)
	}
	wantShardRole(t, "task2 owner after unlock", v1.state(users, shardTable("db1", "users")), shardddl.RoleOwner, "")
	wantShardRole(t, "task2 unsynced member reaching the DDL", v2.report(users, shardTable("db2", "users"), addIndex, 600),
		shardddl.RoleSkip, shardddl.ResolvedUnlocked)

	// The decided lock, --owner: the execution moves to mysql-02 while
	// mysql-01 has not begun; once mysql-02 began, it cannot move back.
	r := h.ok("shard-ddl-lock", "unlock", lockDecided, "--owner", "mysql-02")
	if want := "lock " + lockDecided + " unlocked (decided): source mysql-02 runs " + addColumn; !strings.Contains(r.stdout, want) {
		t.Errorf("unlock --owner: %q, want %q", r.stdout, want)
	}
	wantShardRole(t, "new owner", w2.state(orders, shardTable("db2", "orders")), shardddl.RoleOwner, "")
	wantShardRole(t, "old owner", w1.state(orders, shardTable("db1", "orders")), shardddl.RoleWaiting, "")
	if _, err := w2.c.Begin(h.ctx(), orders, shardTable("db2", "orders")); err != nil {
		t.Fatal(err)
	}
	h.fail([]string{"shard-ddl-lock", "unlock", lockDecided, "--owner", "mysql-01"},
		"owner mysql-02 `db2`.`orders` of lock "+lockDecided+" began running", "--force-remove")
	if l := h.lockList("task1"); l[1].ID != lockDecided || l[1].State != shardddl.LockExecuting || l[1].Owner != "mysql-02" {
		t.Errorf("after Begin: %+v", l[1])
	}

	// The conflicting lock, --force-remove: gone, nobody runs a DDL, both
	// members skip theirs.
	res = shardDDLUnlockJSON{}
	h.runJSON(&res, "shard-ddl-lock", "unlock", lockConflict, "--force-remove")
	if res.ID != lockConflict || !res.ForceRemove || res.Lock != nil {
		t.Errorf("force-remove: %+v", res)
	}
	wantShardRole(t, "mysql-01 after force-remove", w1.state(items, shardTable("db1", "items")), shardddl.RoleSkip, shardddl.ResolvedForceRemoved)
	wantShardRole(t, "mysql-02 after force-remove", w2.state(items, shardTable("db2", "items")), shardddl.RoleSkip, shardddl.ResolvedForceRemoved)
	if got := ids(h.lockList("task1")); !slices.Equal(got, []string{lockDecided}) {
		t.Errorf("task1 after force-remove: %v", got)
	}

	// A decided lock that already began can still be force-removed (text
	// output).
	r = h.ok("shard-ddl-lock", "unlock", lockDecided, "--force-remove")
	if want := "lock " + lockDecided + " force-removed: nobody runs its DDLs"; !strings.Contains(r.stdout, want) {
		t.Errorf("force-remove text: %q", r.stdout)
	}
	wantShardRole(t, "executing owner after force-remove", w2.state(orders, shardTable("db2", "orders")),
		shardddl.RoleSkip, shardddl.ResolvedForceRemoved)
}

func TestShardDDLLockUnlockOwnerOfPending(t *testing.T) {
	h := newHarness(t)
	carts := shardTable("shard", "carts")
	id := "task1-`shard`.`carts`"
	w1, w2 := h.shardWorker("task1", "mysql-01"), h.shardWorker("task1", "mysql-02")
	w1.share(carts, shardTable("db1", "carts"))
	w2.share(carts, shardTable("db2", "carts"), shardTable("db2", "carts_b"))
	ddl := "ALTER TABLE `shard`.`carts` DROP COLUMN `x`"
	w1.report(carts, shardTable("db1", "carts"), ddl, 100)
	w2.report(carts, shardTable("db2", "carts"), ddl, 200) // db2.carts_b never reports

	r := h.ok("shard-ddl-lock", "unlock", id, "--owner", "mysql-02")
	for _, w := range []string{"source mysql-02 runs " + ddl, "skip them when they do: mysql-02 `db2`.`carts_b`"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("unlock --owner output lacks %q:\n%s", w, r.stdout)
		}
	}
	wantShardRole(t, "--owner source", w2.state(carts, shardTable("db2", "carts")), shardddl.RoleOwner, "")
	wantShardRole(t, "first reporter", w1.state(carts, shardTable("db1", "carts")), shardddl.RoleWaiting, "")
}

func TestShardDDLLockMalformed(t *testing.T) {
	h := newHarness(t)
	h.shardLocks()
	badKey := testPrefix + "/shardddl/task3/shard/broken/lock"
	h.put("/shardddl/task3/shard/broken/lock", "{not json")

	r := h.run("--output", "json", "shard-ddl-lock")
	if r.code != 1 || !strings.Contains(r.stderr, badKey) || !strings.Contains(r.stderr, "fix or delete the key") ||
		!strings.Contains(r.stderr, "task3-`shard`.`broken`") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var doc shardDDLLockListJSON
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
	if got := ids(doc.Locks); !slices.Equal(got, []string{lockConflict, lockDecided, lockStuck}) {
		t.Errorf("the other locks: %v", got)
	}
	if len(doc.Errors) != 1 || !strings.Contains(doc.Errors[0], badKey) {
		t.Errorf("errors %q", doc.Errors)
	}

	r = h.run("shard-ddl-lock")
	if r.code != 1 || !strings.Contains(r.stderr, badKey) || !strings.Contains(r.stdout, lockStuck) {
		t.Errorf("text: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// Another task's listing does not read the bad key.
	if got := ids(h.lockList("task2")); !slices.Equal(got, []string{lockStuck}) {
		t.Errorf("task2: %v", got)
	}
	// Unlocking the broken lock names the key.
	h.fail([]string{"shard-ddl-lock", "unlock", "task3-`shard`.`broken`", "--force-remove"}, badKey, "fix or delete the key")
}

func TestLookupLongestName(t *testing.T) {
	all := commands()
	for _, c := range []struct {
		args     []string
		cmd      string
		restArgs []string
	}{
		{[]string{"shard-ddl-lock"}, "shard-ddl-lock", []string{}},
		{[]string{"shard-ddl-lock", "task1"}, "shard-ddl-lock", []string{"task1"}},
		{[]string{"shard-ddl-lock", "unlock", lockStuck}, "shard-ddl-lock unlock", []string{lockStuck}},
		{[]string{"shard-ddl-lock", "--", "unlock"}, "shard-ddl-lock", []string{"--", "unlock"}},
		{[]string{"task", "status", "t"}, "task status", []string{"t"}},
	} {
		cmd, rest := lookup(all, c.args)
		if cmd == nil || cmd.name != c.cmd || !slices.Equal(rest, c.restArgs) {
			t.Errorf("%q: %v %q", c.args, cmd, rest)
		}
	}
}

// optModel is a table schema (id INT NOT NULL, a of type aType) as a
// worker's schema tracker would report it.
func optModel(t *testing.T, aDataType, aType, charset string) *sqlschema.Table {
	t.Helper()
	id, err := sqlschema.NewColumn("id", "int", "int(11)", "", false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := sqlschema.NewColumn("a", aDataType, aType, charset, true)
	if err != nil {
		t.Fatal(err)
	}
	a.SetDefault("NULL", true)
	return &sqlschema.Table{Schema: "db", Name: "t", Columns: []sqlschema.Column{id, a}}
}

// An optimistic lock is listed with mode optimistic, its conflict and its
// members; unlock has nothing to decide on it but --force-remove drops the
// conflicting DDL.
func TestShardDDLLockOptimistic(t *testing.T) {
	h := newHarness(t)
	const lock = "task3-`shard`.`events`"
	const modify = "ALTER TABLE `shard`.`events` MODIFY COLUMN `a` VARCHAR(10)"
	events := shardTable("shard", "events")
	w1, w2 := h.shardWorker("task3", "mysql-01"), h.shardWorker("task3", "mysql-02")
	for _, w := range []*shardWorker{w1, w2} {
		src := "db1"
		if w == w2 {
			src = "db2"
		}
		if _, err := w.c.ShareOptimistic(h.ctx(), events, map[shardddl.Table]*sqlschema.Table{
			shardTable(src, "events"): optModel(t, "int", "int(11)", "")}); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.lockList("task3"); len(got) != 0 {
		t.Fatalf("tables that agree: locks %v", ids(got))
	}
	st, err := w1.c.ReportOptimistic(h.ctx(), shardddl.OptReport{Target: events, Table: shardTable("db1", "events"),
		DDLs: []string{modify}, Before: optModel(t, "int", "int(11)", ""), After: optModel(t, "varchar", "varchar(10)", "utf8mb4"),
		Location: shardddl.Location{Name: "mariadb-bin.000001", Pos: 100}})
	if err != nil || st.Role != shardddl.RoleConflict || !st.Wait {
		t.Fatalf("conflicting report: %+v, %v", st, err)
	}
	l := h.lockList("task3")
	if len(l) != 1 || l[0].ID != lock || l[0].Mode != shardddl.ModeOptimistic || l[0].State != shardddl.LockConflict ||
		l[0].Owner != "" || !slices.Equal(l[0].DDLs, []string{modify}) || members(l[0].Synced) != "mysql-02 `db2`.`events`" ||
		members(l[0].Unsynced) != "mysql-01 `db1`.`events`" || !strings.Contains(l[0].Conflict, "no common widening ladder") {
		t.Fatalf("optimistic lock listed as %+v", l)
	}
	text := h.ok("shard-ddl-lock", "task3").stdout
	for _, w := range []string{lock, "optimistic", "conflict", modify, "conflict: lock " + lock + ": mysql-01 `db1`.`events` reached"} {
		if !strings.Contains(text, w) {
			t.Errorf("table lacks %q:\n%s", w, text)
		}
	}
	h.fail([]string{"shard-ddl-lock", "unlock", lock}, "an optimistic lock has nothing to decide", "task handle-error", "--force-remove")
	var res shardDDLUnlockJSON
	h.runJSON(&res, "shard-ddl-lock", "unlock", lock, "--force-remove")
	if !res.ForceRemove || res.Lock != nil {
		t.Errorf("force-remove: %+v", res)
	}
	st, err = w1.c.StateOptimistic(h.ctx(), events, shardTable("db1", "events"))
	if err != nil || st.Role != shardddl.RoleResolved || st.Resolved != shardddl.OptForceRemoved {
		t.Fatalf("after --force-remove: %+v, %v", st, err)
	}
}
