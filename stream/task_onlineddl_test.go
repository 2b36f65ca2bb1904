package stream

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/onlineddl"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// oscRows is how many rows app.t has when an online schema change starts.
const oscRows = 1500

// oscStream is a stream of app with online-ddl on.
func oscStream(name string, snapshot bool) *config.StreamConfig {
	s := taskStream(name, snapshot)
	s.OnlineDDL = true
	return s
}

// setupOSC creates app.t with oscRows rows, a leftover trash table with
// rows, and copy.t, the empty copy of app.t as it is before the schema
// change, which replayOSC applies the events to.
func setupOSC(t *testing.T, e *taskEnv) {
	t.Helper()
	encExec(t, e.root, "CREATE DATABASE app",
		"CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(40), KEY (k))",
		"CREATE TABLE app._u_old (id INT PRIMARY KEY)", "INSERT INTO app._u_old VALUES (1), (2)",
		"CREATE DATABASE copy", "CREATE TABLE copy.t LIKE app.t")
	var vals []string
	for i := 1; i <= oscRows; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d, 'v%d')", i, i%17, i))
	}
	encExec(t, e.root, "INSERT INTO app.t VALUES "+strings.Join(vals, ","))
}

// oscWorkload writes to app.t until stopped: inserts, updates and
// deletes. While a gh-ost shadow table is set it applies each change to
// the shadow too, as gh-ost applies the binlog's changes of t to it;
// after the cut-over its rows carry c2.
type oscWorkload struct {
	db *sql.DB

	mu     sync.Mutex // held for one change of t and its copy to the shadow
	shadow string
	after  bool
	next   int // the next id to insert

	done   atomic.Int64 // changes made
	exited atomic.Bool  // the writer stopped (failed, or stopped)
	// quit stops the writer between two changes: a statement cancelled
	// mid-flight may still commit on the source after the client gave
	// up, after the test read the position the stream must reach.
	quit atomic.Bool
	wg   sync.WaitGroup
	err  error // the first failure, read after wg.Wait
}

func startOSCWorkload(t *testing.T, db *sql.DB) *oscWorkload {
	w := &oscWorkload{db: db, next: oscRows + 1}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.exited.Store(true)
		for i := 0; !w.quit.Load(); i++ {
			ctx, cancel := context.WithTimeout(context.Background(), taskTimeout)
			err := w.change(ctx, i)
			cancel()
			if err != nil {
				w.err = err
				return
			}
			w.done.Add(1)
		}
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// change makes change i to app.t (and to the shadow).
func (w *oscWorkload) change(ctx context.Context, i int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := 1 + (i*7919)%(w.next-1)
	var qs []string
	switch i % 4 {
	case 0, 1:
		id = w.next
		w.next++
		if w.after {
			qs = append(qs, fmt.Sprintf("INSERT INTO app.t (id, k, v, c2) VALUES (%d, %d, 'n%d', %d)", id, id%17, i, i%5))
		} else {
			qs = append(qs, fmt.Sprintf("INSERT INTO app.t (id, k, v) VALUES (%d, %d, 'n%d')", id, id%17, i))
		}
	case 2:
		set := fmt.Sprintf("v = 'u%d', k = k + 1", i)
		if w.after {
			set += ", c2 = c2 + 1"
		}
		qs = append(qs, fmt.Sprintf("UPDATE app.t SET %s WHERE id = %d", set, id))
	case 3:
		qs = append(qs, fmt.Sprintf("DELETE FROM app.t WHERE id = %d", id))
	}
	if w.shadow != "" {
		// gh-ost's apply of the binlog row: REPLACE of the row image, or
		// DELETE.
		if i%4 == 3 {
			qs = append(qs, fmt.Sprintf("DELETE FROM app.`%s` WHERE id = %d", w.shadow, id))
		} else {
			qs = append(qs, fmt.Sprintf("REPLACE INTO app.`%s` (id, k, v) SELECT id, k, v FROM app.t WHERE id = %d", w.shadow, id))
		}
	}
	for _, q := range qs {
		if _, err := w.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// setShadow starts (or, with "", ends) the copy of changes to shadow.
func (w *oscWorkload) setShadow(shadow string) {
	w.mu.Lock()
	w.shadow = shadow
	w.mu.Unlock()
}

// maxID is the highest id inserted so far.
func (w *oscWorkload) maxID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next - 1
}

// progress waits until the workload made n more changes.
func (w *oscWorkload) progress(t *testing.T, n int64) {
	t.Helper()
	want := w.done.Load() + n
	testutil.WaitFor(t, taskTimeout, "workload progress", func() bool { return w.done.Load() >= want || w.exited.Load() })
	if w.done.Load() < want {
		w.stop(t)
		t.FailNow()
	}
}

// stop ends the workload and fails t on its error.
func (w *oscWorkload) stop(t *testing.T) {
	t.Helper()
	w.quit.Store(true)
	w.wg.Wait()
	if w.err != nil {
		t.Errorf("workload: %v", w.err)
		w.err = nil
	}
}

// ghostOSC issues gh-ost's statements to change app.t (ADD COLUMN c2 INT
// NOT NULL DEFAULT 7) while w writes to it: the changelog and shadow
// tables, the shadow's ALTER, the row copy in chunks with INSERT IGNORE …
// SELECT while w applies its changes to the shadow too, the cut-over
// sentry, the atomic RENAME (with w stopped, as gh-ost's LOCK TABLES does)
// and the drops. midCopy runs after half the chunks.
func ghostOSC(t *testing.T, e *taskEnv, w *oscWorkload, midCopy func()) {
	t.Helper()
	encExec(t, e.root,
		"CREATE /* gh-ost */ TABLE app._t_ghc (id BIGINT AUTO_INCREMENT, last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP "+
			"ON UPDATE CURRENT_TIMESTAMP, hint VARCHAR(64) CHARSET ascii NOT NULL, value VARCHAR(4096) CHARSET ascii NOT NULL, "+
			"PRIMARY KEY (id), UNIQUE KEY hint_uidx (hint)) AUTO_INCREMENT = 256",
		"INSERT /* gh-ost */ INTO app._t_ghc (id, hint, value) VALUES (NULLIF(2, 0), 'state', 'GhostTableMigrated') "+
			"ON DUPLICATE KEY UPDATE last_update = NOW(), value = VALUES(value)",
		"CREATE /* gh-ost */ TABLE app._t_gho LIKE app.t",
		"ALTER /* gh-ost */ TABLE app._t_gho ADD COLUMN c2 INT NOT NULL DEFAULT 7")
	w.setShadow("_t_gho")
	const chunk = 250
	top := w.maxID()
	for lo, n := 0, 0; lo <= top; lo, n = lo+chunk, n+1 {
		encExec(t, e.root, fmt.Sprintf("INSERT /* gh-ost */ IGNORE INTO app._t_gho (id, k, v) (SELECT id, k, v FROM app.t "+
			"FORCE INDEX (PRIMARY) WHERE id >= %d AND id < %d LOCK IN SHARE MODE)", lo, lo+chunk),
			fmt.Sprintf("INSERT /* gh-ost */ INTO app._t_ghc (hint, value) VALUES ('heartbeat', '%d') "+
				"ON DUPLICATE KEY UPDATE last_update = NOW(), value = VALUES(value)", n))
		w.progress(t, 5) // changes interleave with the copy
		if n == (top/chunk)/2 && midCopy != nil {
			midCopy()
		}
	}
	// The cut-over: gh-ost locks t (no writes), applies the rest of the
	// binlog, then swaps the tables.
	w.mu.Lock()
	encExec(t, e.root,
		"CREATE /* gh-ost */ TABLE app._t_del (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB COMMENT='ghost-cut-over-sentry'",
		"DROP /* gh-ost */ TABLE IF EXISTS app._t_del",
		"RENAME /* gh-ost */ TABLE app.t TO app._t_del, app._t_gho TO app.t")
	w.shadow, w.after = "", true
	w.mu.Unlock()
	// gh-ost keeps the old table unless --ok-to-drop-table: replayOSC
	// compares it with the events before the cut-over.
	encExec(t, e.root, "DROP /* gh-ost */ TABLE IF EXISTS app._t_ghc")
	w.progress(t, 40) // rows with c2
}

// oscEvent is an event as the checks read it.
type oscEvent struct {
	ev Event
	v  struct {
		Before map[string]any `json:"before"`
		After  map[string]any `json:"after"`
		Op     string         `json:"op"`
		DDL    string         `json:"ddl"`
	}
}

// dedupe decodes events and drops replays (same identity), as a consumer
// that dedupes on identity does.
func dedupe(t *testing.T, events []Event) []oscEvent {
	t.Helper()
	seen := map[string]bool{}
	var out []oscEvent
	for _, ev := range events {
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		oe := oscEvent{ev: ev}
		d := json.NewDecoder(strings.NewReader(string(ev.Value)))
		d.UseNumber()
		if err := d.Decode(&oe.v); err != nil {
			t.Fatalf("event %s: %v", ev.Value, err)
		}
		out = append(out, oe)
	}
	return out
}

// checkOSCEvents checks the events of a stream of app across an online
// schema change of app.t that added c2: no event names a shadow or trash
// table, exactly one DDL event is of app.t and carries the ALTER naming
// app.t (wantDDL), rows of app.t carry c2 exactly after it. It returns the
// DDL event's identity.
func checkOSCEvents(t *testing.T, events []oscEvent, wantDDL string) string {
	t.Helper()
	rules, err := onlineddl.NewRules(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ddlAt, ddlID := -1, ""
	for i, oe := range events {
		ev := oe.ev
		if rules.Online(ev.Table) {
			t.Errorf("event %d names %s.%s, a shadow or trash table: %s", i, ev.DB, ev.Table, ev.Value)
		}
		if ev.Op == "ddl" {
			for _, name := range []string{"_t_gho", "_t_ghc", "_t_del", "_t_new", "_t_old"} {
				if strings.Contains(oe.v.DDL, name) {
					t.Errorf("DDL event %d names %s: %s", i, name, oe.v.DDL)
				}
			}
			if ev.DB == "app" && ev.Table == "t" {
				if ddlAt >= 0 {
					t.Errorf("a second DDL event of app.t (%d, first %d): %s", i, ddlAt, oe.v.DDL)
				}
				ddlAt, ddlID = i, ev.ID
				if !strings.HasPrefix(oe.v.DDL, wantDDL) {
					t.Errorf("DDL event of app.t %q, want it to start with %q", oe.v.DDL, wantDDL)
				}
			}
			continue
		}
		if ev.DB != "app" || ev.Table != "t" {
			t.Errorf("event %d of %s.%s, want only app.t: %s", i, ev.DB, ev.Table, ev.Value)
			continue
		}
		img := oe.v.After
		if img == nil {
			img = oe.v.Before
		}
		_, has := img["c2"]
		if after := ddlAt >= 0; has != after {
			t.Errorf("row event %d (op %s, DDL event at %d) has c2: %v, want %v", i, oe.v.Op, ddlAt, has, after)
		}
	}
	if ddlAt < 0 {
		t.Fatalf("no DDL event of app.t in %d events", len(events))
	}
	if ddlAt == len(events)-1 {
		t.Errorf("no row event after the cut-over's DDL event")
	}
	t.Logf("%d events, the DDL event of app.t at %d: %s", len(events), ddlAt, events[ddlAt].v.DDL)
	return ddlID
}

// replayOSC applies events in order to copy.t: rows by key, the DDL
// events of app.t run on copy.t. Just before the DDL event copy.t must
// hold the rows of app.old, the table the cut-over renamed t to (what t
// held then, as the binlog has it); at the end copy.t must be app.t: the
// same SHOW CREATE TABLE and the same rows.
func replayOSC(t *testing.T, e *taskEnv, events []oscEvent, old string) {
	t.Helper()
	arg := func(v any) any {
		if n, ok := v.(json.Number); ok {
			return n.String()
		}
		return v
	}
	for i, oe := range events {
		var qs []string
		var args [][]any
		switch oe.v.Op {
		case "ddl":
			if before, want := checksum(t, e.root, "copy", "t"), checksum(t, e.root, "app", old); before != want {
				t.Errorf("before the cut-over's DDL event (%d) the replayed copy differs from app.%s, t as the cut-over left it "+
					"(checksums %d and %d): the events before the cut-over are not t's changes", i, old, before, want)
				explainOSCDiff(t, e, events, old)
			}
			for _, q := range strings.Split(strings.ReplaceAll(oe.v.DDL, "`app`.", "`copy`."), ";\n") {
				qs, args = append(qs, q), append(args, nil)
			}
		case "d", "u":
			qs, args = append(qs, "DELETE FROM copy.t WHERE id = ?"), append(args, []any{arg(oe.v.Before["id"])})
		}
		if oe.v.Op == "c" || oe.v.Op == "r" || oe.v.Op == "u" {
			var cols, marks []string
			var a []any
			for c, v := range oe.v.After {
				cols, marks, a = append(cols, "`"+c+"`"), append(marks, "?"), append(a, arg(v))
			}
			qs = append(qs, "REPLACE INTO copy.t ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(marks, ", ")+")")
			args = append(args, a)
		}
		for j, q := range qs {
			if _, err := e.root.ExecContext(t.Context(), q, args[j]...); err != nil {
				t.Fatalf("replay event %d (%s): %s: %v", i, oe.ev.Value, q, err)
			}
		}
	}
	show := func(db string) string {
		var name, ddl string
		if err := e.root.QueryRow("SHOW CREATE TABLE `"+db+"`.t").Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		return ddl
	}
	if src, cp := show("app"), show("copy"); src != cp {
		t.Errorf("the replayed copy's table differs:\nsource: %s\ncopy:   %s", src, cp)
	}
	var n int
	if err := e.root.QueryRow("SELECT COUNT(*) FROM app.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < oscRows/2 {
		t.Fatalf("app.t has %d rows: the test wrote too little", n)
	}
	t.Logf("replayed %d events; app.t has %d rows", len(events), n)
	if checksum(t, e.root, "app", "t") != checksum(t, e.root, "copy", "t") {
		e.sameTables(t, "t")
		explainOSCDiff(t, e, events, "t")
	}
}

// binlogChanges lists the row changes of id (first column) in the
// source's binlog files, as mysqlbinlog decodes them.
func binlogChanges(e *taskEnv, id int) string {
	files, _ := filepath.Glob(filepath.Join(e.src.Dir(), "*", "mariadb-bin.0*"))
	if len(files) == 0 {
		files, _ = filepath.Glob(filepath.Join(e.src.Dir(), "mariadb-bin.0*"))
	}
	out, err := exec.Command("mysqlbinlog", append([]string{"--base64-output=decode-rows", "-v"}, files...)...).Output()
	if err != nil {
		return fmt.Sprintf("mysqlbinlog %v: %v", files, err)
	}
	var res []string
	at, change := "", ""
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "# at "):
			at = line
		case strings.HasPrefix(line, "### INSERT"), strings.HasPrefix(line, "### UPDATE"), strings.HasPrefix(line, "### DELETE"):
			change = line
		case strings.TrimSpace(line) == "###   @1="+strconv.Itoa(id):
			res = append(res, at+" "+change)
		}
	}
	return strings.Join(res, "\n")
}

// explainOSCDiff logs the rows in which app.t and copy.t differ and the
// events of each.
func explainOSCDiff(t *testing.T, e *taskEnv, events []oscEvent, table string) {
	t.Helper()
	q := "SELECT a.id, 'only in %[1]s' FROM %[1]s a LEFT JOIN %[2]s b USING (id) WHERE b.id IS NULL " +
		"UNION ALL SELECT a.id, 'differs' FROM %[1]s a JOIN %[2]s b USING (id) WHERE NOT (a.k <=> b.k AND a.v <=> b.v) AND '%[1]s' = 'copy.t'"
	for _, dbs := range [][2]string{{"app." + table, "copy.t"}, {"copy.t", "app." + table}} {
		rows, err := e.root.Query(fmt.Sprintf(q, dbs[0], dbs[1]))
		if err != nil {
			t.Log(err)
			return
		}
		for rows.Next() {
			var id int
			var what string
			if err := rows.Scan(&id, &what); err != nil {
				t.Log(err)
				break
			}
			var evs []string
			for i, oe := range events {
				img := oe.v.After
				if img == nil {
					img = oe.v.Before
				}
				if fmt.Sprint(img["id"]) == strconv.Itoa(id) || fmt.Sprint(oe.v.Before["id"]) == strconv.Itoa(id) {
					evs = append(evs, fmt.Sprintf("#%d %s %s", i, oe.ev.ID, oe.ev.Value))
				}
			}
			t.Logf("id %d %s; its events:\n%s\nits changes in the source's binlog:\n%s", id, what, strings.Join(evs, "\n"), binlogChanges(e, id))
		}
		_ = rows.Close()
	}
}

// TestTaskOnlineDDLGhost runs gh-ost's statement sequence on the source
// under a stream with online-ddl and fill-history, with writes to t all
// along: the events name no shadow or trash table (nor does fill-history
// read one), one DDL event of t carries the ALTER in the place of the
// RENAME, rows after it have c2, and replaying the events into an empty
// copy gives the source's table.
func TestTaskOnlineDDLGhost(t *testing.T) {
	e := newTaskEnv(t)
	setupOSC(t, e)
	sink := newMemSink()
	var sv saves
	r := startTask(t, TaskConfig{Stream: oscStream("osc", true), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save, SnapshotChunk: 500})
	testutil.WaitFor(t, taskTimeout, "fill-history done", func() bool { return sv.last().SnapshotDone })
	if fs := r.task.Status().FillHistory; fs == nil || fs.Tables != 1 {
		t.Errorf("fill-history status %+v, want 1 table (the trash table left out)", fs)
	}
	w := startOSCWorkload(t, e.root)
	w.progress(t, 20)
	ghostOSC(t, e, w, nil)
	w.stop(t)
	r.waitCaughtUp(t, e)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if cp := sv.last(); len(cp.OnlineDDL) != 0 {
		t.Errorf("checkpoint after the cut-over still has online-DDL records %+v", cp.OnlineDDL)
	}
	events := dedupe(t, sink.all())
	if len(events) != len(sink.all()) {
		t.Errorf("%d of %d events are replays in a run without restart", len(sink.all())-len(events), len(events))
	}
	checkOSCEvents(t, events, "ALTER TABLE `app`.`t` ADD COLUMN `c2` INT NOT NULL DEFAULT 7")
	replayOSC(t, e, events, "_t_del")
}

// TestTaskOnlineDDLRestart stops persisting the checkpoint (as a kill -9
// does) once the saved checkpoint passed the shadow's ALTER and before
// the cut-over, lets the task deliver the cut-over's DDL event anyway,
// then starts a new task from the meta store: it delivers the ALTER again
// at the cut-over (same identity), and the events, deduplicated, give the
// source's table.
func TestTaskOnlineDDLRestart(t *testing.T) {
	e := newTaskEnv(t)
	setupOSC(t, e)
	path := filepath.Join(t.TempDir(), "meta.db")
	m, err := OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := oscStream("osc", true)
	if err := m.Put(Record{Name: cfg.Name, Config: cfg, State: StateStreaming}); err != nil {
		t.Fatal(err)
	}
	var dead atomic.Bool
	var metaMu sync.Mutex // m is replaced at the restart
	save := func(_ context.Context, cp Checkpoint) error {
		if dead.Load() {
			return nil // killed: nothing reaches the disk any more
		}
		metaMu.Lock()
		defer metaMu.Unlock()
		return m.SaveCheckpoint(cfg.Name, cp)
	}
	saved := func() Checkpoint {
		metaMu.Lock()
		defer metaMu.Unlock()
		rec, _, err := m.Get(cfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Checkpoint
	}
	sink1 := newMemSink()
	r1 := startTask(t, TaskConfig{Stream: cfg, Source: e.source(), DB: e.db, Sink: sink1, Save: save, SaveLocal: save})
	testutil.WaitFor(t, taskTimeout, "fill-history done", func() bool { return saved().SnapshotDone })
	w := startOSCWorkload(t, e.root)
	w.progress(t, 20)

	var killedAt Checkpoint
	ghostOSC(t, e, w, func() {
		// The shadow's ALTER is in a saved checkpoint's records.
		testutil.Eventually(t, taskTimeout, "the shadow's ALTER saved with the checkpoint", func() error {
			cp := saved()
			if len(cp.OnlineDDL) != 1 || len(cp.OnlineDDL[0].Stmts) != 1 {
				return fmt.Errorf("saved online-DDL records %+v", cp.OnlineDDL)
			}
			return nil
		})
		dead.Store(true)
		killedAt = saved()
	})
	rec := killedAt.OnlineDDL[0]
	if rec.Schema != "app" || rec.Real != "t" || rec.Shadow != "_t_gho" ||
		!strings.HasPrefix(rec.Stmts[0].SQL, "ALTER TABLE `app`.`t` ADD COLUMN `c2`") {
		t.Fatalf("saved record %+v", rec)
	}
	// The first task delivers the cut-over (not saved), then dies.
	testutil.WaitFor(t, taskTimeout, "the first task delivered the cut-over", func() bool {
		for _, ev := range sink1.all() {
			if ev.Op == "ddl" && ev.Table == "t" {
				return true
			}
		}
		return false
	})
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	w.stop(t)

	metaMu.Lock()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m, err = OpenMeta(path); err != nil {
		t.Fatal(err)
	}
	metaMu.Unlock()
	t.Cleanup(func() { _ = m.Close() })
	start := saved()
	if start.Location != killedAt.Location || len(start.OnlineDDL) != 1 {
		t.Fatalf("the meta store has %+v after the kill, want the checkpoint %+v", start, killedAt)
	}
	dead.Store(false)
	sink2 := newMemSink()
	r2 := startTask(t, TaskConfig{Stream: cfg, Source: e.source(), DB: e.db, Sink: sink2, Save: save, Start: start})
	r2.waitCaughtUp(t, e)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if cp := saved(); len(cp.OnlineDDL) != 0 {
		t.Errorf("checkpoint after the cut-over still has online-DDL records %+v", cp.OnlineDDL)
	}
	second := dedupe(t, sink2.all())
	ddlID := checkOSCEvents(t, second, "ALTER TABLE `app`.`t` ADD COLUMN `c2` INT NOT NULL DEFAULT 7")
	all := dedupe(t, append(sink1.all(), sink2.all()...))
	if id := checkOSCEvents(t, all, "ALTER TABLE `app`.`t` ADD COLUMN `c2` INT NOT NULL DEFAULT 7"); id != ddlID {
		t.Errorf("the replayed cut-over's DDL event has identity %s, the first delivery %s", ddlID, id)
	}
	replayOSC(t, e, all, "_t_del")
}

// TestTaskOnlineDDLErrors: a DDL of a shadow table created before the
// stream started, and a rename of a shadow table to another table than
// its real one, stop the stream with a non-resumable stream-online-ddl
// error naming the tables; what came before is delivered, nothing of the
// statement, and the checkpoint stays before it.
func TestTaskOnlineDDLErrors(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app")
	for _, tt := range []struct {
		name, table string
		before, osc []string
		says        string
		names       []string
	}{
		{"shadow created before the stream", "a", []string{"CREATE TABLE app._a_gho (id INT PRIMARY KEY)"},
			[]string{"ALTER TABLE app._a_gho ADD COLUMN c2 INT"}, "did not see", []string{"`app`.`_a_gho`", "`app`.`a`"}},
		{"shadow renamed to another table", "b", nil, []string{"CREATE TABLE app._b_gho LIKE app.b", "ALTER TABLE app._b_gho ADD COLUMN c2 INT",
			"RENAME TABLE app._b_gho TO app.other"}, "another table", []string{"`app`.`_b_gho`", "`app`.`other`"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			table := tt.table
			encExec(t, e.root, fmt.Sprintf("CREATE TABLE app.%s (id INT PRIMARY KEY)", table))
			encExec(t, e.root, tt.before...)
			sink := newMemSink()
			var sv saves
			r := startTask(t, TaskConfig{Stream: oscStream("err-"+table, false), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
			testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
			// Not waited for: the error delivers what came before.
			encExec(t, e.root, fmt.Sprintf("INSERT INTO app.%s VALUES (1)", table))
			last := len(tt.osc) - 1
			encExec(t, e.root, tt.osc[:last]...)
			file, pos, _ := e.src.MasterStatus(t)
			encExec(t, e.root, tt.osc[last])
			encExec(t, e.root, fmt.Sprintf("INSERT INTO app.%s VALUES (2)", table))
			err := r.wait(t)
			named := err != nil && strings.Contains(err.Error(), tt.says) && strings.Contains(err.Error(), "--ignore-untreated")
			for _, n := range tt.names {
				named = named && strings.Contains(err.Error(), n)
			}
			if errs.Code(err) != CodeOnlineDDL || errs.IsResumable(err) || !named {
				t.Fatalf("Run returned %v (code %q, resumable %v); want a non-resumable %s error saying %q, naming %q and the fix",
					err, errs.Code(err), errs.IsResumable(err), CodeOnlineDDL, tt.says, tt.names)
			}
			if st := r.task.Status(); st.State != StateStopped {
				t.Errorf("state %s after the error, want %s", st.State, StateStopped)
			}
			var ids []string
			for _, ev := range sink.all() {
				ids = append(ids, ev.Op+" "+ev.Table+" "+string(ev.Key))
			}
			if want := []string{"c " + table + ` {"id":1}`}; strings.Join(ids, ",") != strings.Join(want, ",") {
				t.Errorf("events %q, want %q (the row before the statement, nothing after)", ids, want)
			}
			if cp := sv.last().Location; cp.Name != file || cp.Pos != pos {
				t.Errorf("checkpoint %s after the error, want %s:%d (just before the statement)", cp, file, pos)
			}
		})
	}
}

// TestTaskOnlineDDLPtOsc runs the real pt-online-schema-change on the
// source under a stream with online-ddl while a workload writes to the
// table, with the task reading the source itself and through the relay:
// the tool's triggers are skipped (counted in status) and do not stop the
// stream, the rows they and the copy write to `_t_new` give no events,
// one DDL event of t carries the ALTER, and replaying the events gives
// the source's table.
func TestTaskOnlineDDLPtOsc(t *testing.T) {
	tool, err := exec.LookPath("pt-online-schema-change")
	if err != nil {
		t.Skip("pt-online-schema-change is not installed (scripts/install-deps.sh installs percona-toolkit)")
	}
	for _, relay := range []bool{false, true} {
		t.Run(fmt.Sprintf("relay %v", relay), func(t *testing.T) {
			e := newTaskEnv(t)
			setupOSC(t, e)
			src := e.source()
			var opener func() binlog.StreamOpener
			if relay {
				rl := e.runRelay(t, src)
				opener = func() binlog.StreamOpener { return rl.NewReader("stream/pt") }
			}
			sink := newMemSink()
			var sv saves
			r := startTask(t, TaskConfig{Stream: oscStream("pt", true), Source: src, Opener: opener, DB: e.db, Sink: sink, Save: sv.save})
			testutil.WaitFor(t, taskTimeout, "fill-history done", func() bool { return sv.last().SnapshotDone })
			w := startOSCWorkload(t, e.root)
			w.progress(t, 20)
			cmd := exec.CommandContext(t.Context(), tool, "--alter", "ADD COLUMN c2 INT NOT NULL DEFAULT 7, ADD INDEX (v)",
				"--execute", "--no-drop-old-table", "--recursion-method=none", "--chunk-size=200", "--set-vars=lock_wait_timeout=60",
				"h="+e.src.Host()+",P="+strconv.Itoa(e.src.Port())+",u=root,D=app,t=t")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("pt-online-schema-change: %v\n%s", err, out)
			}
			w.mu.Lock()
			w.after = true
			w.mu.Unlock()
			w.progress(t, 40)
			w.stop(t)
			r.waitCaughtUp(t, e)
			st := r.task.Status()
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if st.SkippedDDLs < 6 {
				t.Errorf("%d statements skipped, want pt-osc's 3 CREATE TRIGGER and 3 DROP TRIGGER at least\n%s", st.SkippedDDLs, out)
			}
			events := dedupe(t, sink.all())
			checkOSCEvents(t, events, "ALTER TABLE `app`.`t` ADD COLUMN `c2` INT NOT NULL DEFAULT 7, ADD INDEX(`v`)")
			replayOSC(t, e, events, "_t_old")
		})
	}
}

// TestTaskOnlineDDLTriggers: pt-online-schema-change's trigger DDL, as
// the tool writes it (DEFINER, a BEGIN … END body with a handler), does
// not stop a stream, with online-ddl on or off: it is skipped, counted
// in status, and the rows the triggers write to `_t_new` are delivered
// only with online-ddl off.
func TestTaskOnlineDDLTriggers(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)", "CREATE TABLE app._t_new LIKE app.t")
	triggers := []string{
		"CREATE DEFINER=`root`@`localhost` TRIGGER `app`.`pt_osc_app_t_del` AFTER DELETE ON `app`.`t` FOR EACH ROW BEGIN " +
			"DECLARE CONTINUE HANDLER FOR 1146 begin end; DELETE IGNORE FROM `app`.`_t_new` WHERE `app`.`_t_new`.`id` <=> OLD.`id`; END",
		"CREATE DEFINER=`root`@`localhost` TRIGGER `app`.`pt_osc_app_t_ins` AFTER INSERT ON `app`.`t` FOR EACH ROW BEGIN " +
			"DECLARE CONTINUE HANDLER FOR 1146 begin end; REPLACE INTO `app`.`_t_new` (`id`, `v`) VALUES (NEW.`id`, NEW.`v`); END",
		"DROP TRIGGER IF EXISTS `app`.`pt_osc_app_t_del`",
		"DROP TRIGGER IF EXISTS `app`.`pt_osc_app_t_ins`",
	}
	for i, online := range []bool{false, true} {
		t.Run(fmt.Sprintf("online-ddl %v", online), func(t *testing.T) {
			cfg := taskStream(fmt.Sprintf("trg%d", i), false)
			cfg.OnlineDDL = online
			sink := newMemSink()
			var sv saves
			r := startTask(t, TaskConfig{Stream: cfg, Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
			testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
			encExec(t, e.root, triggers[:2]...)
			encExec(t, e.root, fmt.Sprintf("INSERT INTO app.t VALUES (%d, 1)", 10+i), fmt.Sprintf("DELETE FROM app.t WHERE id = %d", 10+i))
			encExec(t, e.root, triggers[2:]...)
			encExec(t, e.root, fmt.Sprintf("INSERT INTO app.t VALUES (%d, 2)", 20+i))
			r.waitCaughtUp(t, e)
			st := r.task.Status()
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if st.SkippedDDLs != 4 {
				t.Errorf("%d statements skipped, want the 4 trigger statements", st.SkippedDDLs)
			}
			var got []string
			for _, ev := range sink.all() {
				got = append(got, ev.Op+" "+ev.Table)
			}
			want := "c t,c _t_new,d t,d _t_new,c t"
			if online {
				want = "c t,d t,c t"
			}
			if strings.Join(got, ",") != want {
				t.Errorf("events %q, want %q", strings.Join(got, ","), want)
			}
		})
	}
}
