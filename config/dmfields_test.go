package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestDMFieldMapping checks what DM's old and per-instance fields turn into
// in the subtasks.
func TestDMFieldMapping(t *testing.T) {
	const file = `
name: t1
task-mode: all
target-database: {host: 127.0.0.1, session: {foreign_key_checks: 0, sql_safe_updates: false}}
mysql-instances:
  - source-id: s1
    black-white-list: old
    mydumper-thread: 9
    loader-thread: 7
    syncer-thread: 5
    syncer-config-name: named
  - source-id: s2
    block-allow-list: old
    mydumper: {threads: 3, chunk-filesize: 64}
    syncer: {batch: 10, compact: true}
    filter-rules: [stop]
black-white-list:
  old: {do-dbs: [db1]}
syncers:
  named: {worker-count: 2, batch: 20}
filters:
  stop: {schema-pattern: db1, events: [drop table], action: error}
`
	tc, subs, err := CheckTaskConfig([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"black-white-list → block-allow-list", "mysql-instances[0].black-white-list → mysql-instances[0].block-allow-list"}; !slices.Equal(tc.Notes.Renamed, want) {
		t.Errorf("renamed %v, want %v", tc.Notes.Renamed, want)
	}
	if want := []string{"mysql-instances[1].mydumper.chunk-filesize", "mysql-instances[1].syncer.compact"}; !slices.Equal(tc.Notes.Ignored, want) {
		t.Errorf("ignored %v, want %v", tc.Notes.Ignored, want)
	}
	a, b := subs[0], subs[1]
	if !slices.Equal(a.BAList.DoDBs, []string{"db1"}) || !slices.Equal(b.BAList.DoDBs, []string{"db1"}) {
		t.Errorf("black-white-list not mapped: %+v / %+v", a.BAList, b.BAList)
	}
	if a.Mydumper.Threads != 9 || a.Loader.PoolSize != 7 || a.Syncer.WorkerCount != 5 || a.Syncer.Batch != 20 {
		t.Errorf("thread aliases: %+v %+v %+v", a.Mydumper, a.Loader, a.Syncer)
	}
	if b.Mydumper.Threads != 3 || b.Mydumper.Rows != DefaultMydumperRows || b.Syncer.Batch != 10 || b.Syncer.WorkerCount != DefaultSyncerWorkerCount {
		t.Errorf("inline settings: %+v %+v", b.Mydumper, b.Syncer)
	}
	if len(b.FilterRules) != 1 || b.FilterRules[0].Name != "stop" || b.FilterRules[0].Action != FilterError {
		t.Errorf("filter rules %+v", b.FilterRules)
	}
	if s := a.TargetDatabase.Session; s["foreign_key_checks"] != "0" || s["sql_safe_updates"] != "false" {
		t.Errorf("scalar session values read as text: %v", s)
	}
}

// TestCollationCompatible: DM's collation_compatible is read in any case,
// reaches every subtask as "strict" or not at all, and other values are
// refused naming the field.
func TestCollationCompatible(t *testing.T) {
	base := "name: t1\ntask-mode: all\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1}, {source-id: s2}]\n"
	for _, tc := range []struct {
		add    string
		strict bool
	}{{"", false}, {"collation_compatible: loose\n", false}, {"collation_compatible: LOOSE\n", false},
		{"collation_compatible: strict\n", true}, {"collation_compatible: \" Strict\"\n", true}} {
		tc2, subs, err := CheckTaskConfig([]byte(base + tc.add))
		if err != nil {
			t.Fatalf("%q: %v", tc.add, err)
		}
		if len(tc2.Notes.Ignored) != 0 || len(tc2.Notes.Unknown) != 0 {
			t.Errorf("%q: notes %+v", tc.add, tc2.Notes)
		}
		for _, st := range subs {
			want := ""
			if tc.strict {
				want = CollationStrict
			}
			if st.CollationCompatible != want || st.StrictCollation() != tc.strict {
				t.Errorf("%q: subtask %s has collation_compatible %q", tc.add, st.SourceID, st.CollationCompatible)
			}
			j, err := st.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(j), `"collation_compatible":"strict"`); got != tc.strict {
				t.Errorf("%q: subtask JSON %s", tc.add, j)
			}
			again, err := ParseSubTaskConfig(j)
			if err != nil || again.StrictCollation() != tc.strict {
				t.Errorf("%q: subtask JSON does not round-trip: %v", tc.add, err)
			}
		}
	}
	_, _, err := CheckTaskConfig([]byte(base + "collation_compatible: exact\n"))
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "collation_compatible") || !strings.Contains(err.Error(), `"strict"`) {
		t.Errorf("collation_compatible: exact: %v", err)
	}
	st := NewSubTaskConfig()
	st.CollationCompatible = "sometimes"
	if err := st.Validate(); err == nil || !strings.Contains(err.Error(), "collation_compatible") {
		t.Errorf("subtask collation_compatible: sometimes: %v", err)
	}
}

func TestDMFieldRefusals(t *testing.T) {
	base := "name: t1\ntask-mode: all\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1}]\n"
	tests := []struct{ add, field string }{
		{"column-mappings: {m: {}}\n", "column-mappings"},
		{"target-database: {host: h, security: {ssl-ca-base64: c2VjcmV0}}\n", "target-database.security.ssl-ca-base64"},
	}
	for _, tt := range tests {
		in := base + tt.add
		if strings.HasPrefix(tt.add, "target-database") {
			in = strings.Replace(base, "target-database: {host: h}\n", tt.add, 1)
		}
		_, _, err := CheckTaskConfig([]byte(in))
		var de *DecodeError
		if !errors.As(err, &de) || len(de.Refused) != 1 || de.Refused[0].Field != tt.field {
			t.Errorf("%q: want %s refused, got %v", tt.add, tt.field, err)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: not ErrInvalidConfig", tt.add)
		}
		if strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("inline certificate shown: %v", err)
		}
	}
	// The same fields at their harmless values are accepted.
	for _, add := range []string{"shard-mode: ''\n", "is-sharding: false\n", "collation_compatible: LOOSE\n", "remove-meta: false\n", "column-mappings: {}\n"} {
		if _, _, err := CheckTaskConfig([]byte(base + add)); err != nil {
			t.Errorf("%q: %v", add, err)
		}
	}
	if _, err := CheckSourceConfig([]byte("source-id: s\nfrom: {host: h}\nenable: false\n")); err == nil || !strings.Contains(err.Error(), "enable") {
		t.Errorf("source enable: false accepted: %v", err)
	}
}

// TestLenientDecode: unknown fields are listed, not fatal, and Notes never
// reach the encoded form nor break equality of equal values.
func TestLenientDecode(t *testing.T) {
	in := []byte(`{"source-id":"s1","from":{"host":"h","hots":"x"},"new-thing":1,"relay-dir":"r"}`)
	if _, err := ParseSourceConfig(in); err == nil {
		t.Fatal("strict decode accepted unknown fields")
	}
	c, err := DecodeSourceConfig(in, Lenient)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Notes.Unknown, []string{"from.hots", "new-thing"}) || !slices.Equal(c.Notes.Ignored, []string{"relay-dir"}) {
		t.Errorf("notes %+v", c.Notes)
	}
	if c.Purge.Interval != DefaultPurgeInterval || !c.Checker.CheckEnable {
		t.Errorf("defaults not applied: %+v", c)
	}
	j, err := c.JSON()
	if err != nil || strings.Contains(string(j), "hots") || strings.Contains(string(j), "Notes") {
		t.Errorf("encoded: %s %v", j, err)
	}
	again, err := DecodeSourceConfig(in, Lenient)
	if err != nil || !c.Equal(again) {
		t.Errorf("equal values differ: %v", err)
	}
	cl := c.Clone()
	cl.Notes.Unknown[0] = "changed"
	if c.Notes.Unknown[0] != "from.hots" {
		t.Error("Clone shares the notes")
	}
}

func TestWithSourceFilters(t *testing.T) {
	task := []FilterRule{{Name: "t1", SchemaPattern: "app", TablePattern: "t", Events: []string{"delete"}, Action: FilterIgnore}}
	source := []FilterRule{
		{SchemaPattern: "APP", TablePattern: "T", Events: []string{"all"}, Action: FilterIgnore}, // covered by t1
		{SchemaPattern: "*", Events: []string{"drop database"}, Action: FilterError},
	}
	got := WithSourceFilters(task, source, false)
	if len(got) != 2 || got[0].Name != "t1" || got[1].Name != "source filters[1]" || got[1].Action != FilterError {
		t.Fatalf("merged %+v", got)
	}
	if got := WithSourceFilters(task, source, true); len(got) != 3 {
		t.Errorf("case-sensitive: the upper-case pattern is another rule: %+v", got)
	}
	if source[1].Name != "" {
		t.Error("WithSourceFilters modified its input")
	}
}

// TestDecodeJSONCorners: JSON values (what etcd holds) are read as JSON.
func TestDecodeJSONCorners(t *testing.T) {
	c, err := DecodeSourceConfig([]byte(`{"source-id":"s\/1\u0031","from":{"host":"h\tx"},"server-id":4294967295}`), Lenient)
	if err != nil {
		t.Fatal(err)
	}
	if c.SourceID != "s/11" || c.From.Host != "h\tx" || c.ServerID != 4294967295 {
		t.Errorf("decoded %+v", c)
	}
	if _, err := ParseSourceConfig([]byte("source-id: a\nsource-id: b\n")); err == nil {
		t.Error("duplicate YAML keys accepted")
	}
}

// TestDMFieldRulesConsistent: no rule shadows a field of its type (it would
// never apply) and every rename names a field of its type.
func TestDMFieldRulesConsistent(t *testing.T) {
	for typ, rules := range dmFieldRules {
		fields := jsonFields(typ)
		for name, r := range rules {
			if _, _, ok := fields.lookup(name); ok {
				t.Errorf("%s: rule %q shadows a field of the type", typ, name)
			}
			if r.action == rename {
				if _, _, ok := fields.lookup(r.to); !ok {
					t.Errorf("%s: rename %q to %q, which is not a field", typ, name, r.to)
				}
			}
			if r.action == refuseIf && (r.refuse == nil || r.why == "") {
				t.Errorf("%s: refusal of %q without predicate or reason", typ, name)
			}
		}
	}
}
