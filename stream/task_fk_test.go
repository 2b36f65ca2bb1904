package stream

import (
	"testing"

	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestTaskForeignKeyCascadeNotInBinlog documents what docs/streams.md
// says: the rows InnoDB deletes or updates through ON DELETE/ON UPDATE
// CASCADE are not in the binlog, so the stream (as Debezium) emits only
// the statement's own row changes.
func TestTaskForeignKeyCascadeNotInBinlog(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app",
		"CREATE TABLE app.parent (id INT PRIMARY KEY)",
		"CREATE TABLE app.child (id INT PRIMARY KEY, parent INT NOT NULL, "+
			"FOREIGN KEY (parent) REFERENCES app.parent (id) ON DELETE CASCADE ON UPDATE CASCADE)",
		"INSERT INTO app.parent VALUES (1), (2)", "INSERT INTO app.child VALUES (10, 1), (11, 1), (20, 2)")
	sink := newMemSink()
	var sv saves
	r := startTask(t, TaskConfig{Stream: taskStream("fk", false), Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
	testutil.WaitFor(t, taskTimeout, "start checkpoint saved", func() bool { return !sv.last().Location.IsZero() })
	encExec(t, e.root, "DELETE FROM app.parent WHERE id = 1", "UPDATE app.parent SET id = 3 WHERE id = 2")
	var children int
	if err := e.root.QueryRow("SELECT COUNT(*) FROM app.child WHERE parent IN (1, 2)").Scan(&children); err != nil || children != 0 {
		t.Fatalf("the cascade left %d child rows (%v)", children, err)
	}
	r.waitCaughtUp(t, e)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range sink.all() {
		got = append(got, ev.Table+" "+ev.Op+" "+string(ev.Key))
	}
	want := []string{`parent d {"id":1}`, `parent d {"id":2}`, `parent c {"id":3}`}
	if len(got) != len(want) {
		t.Fatalf("events %q, want only the parent's %q: cascaded changes are not in the binlog", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
}
