package stream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestStreamExpressionFilters: rows the stream's filters match give no
// event, across inserts, updates (old and new rows) and deletes; a rule
// naming a column the table lost after a DDL filters nothing; the events
// of the other rows and of the DDL come as always.
func TestStreamExpressionFilters(t *testing.T) {
	e := newTaskEnv(t)
	encExec(t, e.root, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
	st := taskStream("cdc", false)
	st.Filters = map[string]config.ExpressionFilter{
		"even":       {Schema: "app", Table: "t", InsertValueExpr: "v % 2 = 0"},
		"neg-to-big": {Schema: "app", Table: "t", UpdateOldValueExpr: "v < 0", UpdateNewValueExpr: "v > 100"},
		"seven":      {Schema: "app", Table: "t", DeleteValueExpr: "v = 7"},
	}
	sink := newMemSink()
	var sv saves
	r := startTask(t, TaskConfig{Stream: st, Source: e.source(), DB: e.db, Sink: sink, Save: sv.save})
	testutil.Eventually(t, taskTimeout, "task streaming", func() error {
		if s := r.task.Status(); s.State != StateStreaming {
			return fmt.Errorf("state %s, err %v", s.State, s.Err)
		}
		return nil
	})
	encExec(t, e.root,
		"INSERT INTO app.t SELECT seq, seq, 'n' FROM app.seq_1_to_8",
		"UPDATE app.t SET v = -v WHERE id IN (1, 3)",
		"UPDATE app.t SET v = 101 WHERE id = 1", // filtered: old < 0, new > 100
		"UPDATE app.t SET v = 200 WHERE id = 5", // old 5: kept
		"DELETE FROM app.t WHERE id IN (5, 7)")  // 7 filtered
	// The rows before the DDL are read with the table as it is now: they
	// must be delivered first (the stream's schema rule, not the filters').
	r.waitCaughtUp(t, e)
	encExec(t, e.root, "ALTER TABLE app.t DROP COLUMN v",
		"INSERT INTO app.t VALUES (10, 'x')", // the rules name v: nothing filtered
		"DELETE FROM app.t WHERE id = 3")
	r.waitCaughtUp(t, e)
	var got []string
	for _, rec := range memRecords(sink.all()) {
		v := decodeValue(t, rec)
		if v.DDL != "" {
			got = append(got, "ddl")
			continue
		}
		var key map[string]any
		if err := json.Unmarshal(rec.Key, &key); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %v", v.Op, key["id"]))
	}
	want := []string{"c 1", "c 3", "c 5", "c 7", "u 1", "u 3", "u 5", "d 5", "ddl", "c 10", "d 3"}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}
