package config

import (
	"strings"
	"testing"
)

const extendTaskYAML = `name: merge
task-mode: all
target-database: {host: 127.0.0.1, user: root}
mysql-instances:
  - source-id: mysql-01
    route-rules: [shards, schemas]
  - source-id: mysql-02
    route-rules: [shards]
routes:
  shards:
    schema-pattern: "s*"
    table-pattern: "t_*"
    target-schema: db
    target-table: t
    extract-table: {table-regexp: "t_(.*)", target-column: c_table}
    extract-schema: {schema-regexp: "s(.*)", target-column: c_schema}
    extract-source: {source-regexp: "mysql-(.*)", target-column: c_source}
  schemas:
    schema-pattern: "s*"
    target-schema: db
`

func TestExtendColumnsDecodeAndSplit(t *testing.T) {
	task, subs, err := CheckTaskConfig([]byte(extendTaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	r := task.Routes["shards"]
	if r.TableExtractor == nil || r.TableExtractor.TableRegexp != "t_(.*)" || r.TableExtractor.TargetColumn != "c_table" ||
		r.SchemaExtractor == nil || r.SchemaExtractor.SchemaRegexp != "s(.*)" ||
		r.SourceExtractor == nil || r.SourceExtractor.SourceRegexp != "mysql-(.*)" || r.SourceExtractor.TargetColumn != "c_source" {
		t.Fatalf("extractors not decoded: %+v", r)
	}
	if len(subs) != 2 || len(subs[0].RouteRules) != 2 || len(subs[1].RouteRules) != 1 {
		t.Fatalf("split: %+v", subs)
	}
	for i, st := range subs {
		got := st.RouteRules[0].Extractors()
		if len(got) != 3 || got[0].TargetColumn != "c_table" || got[1].TargetColumn != "c_schema" || got[2].TargetColumn != "c_source" {
			t.Errorf("subtask %d: extractors %+v", i, got)
		}
	}
	if subs[0].RouteRules[1].Extractors() != nil {
		t.Errorf("schema rule got extractors: %+v", subs[0].RouteRules[1])
	}
	// The split and clones share no extractor with the task or each other.
	subs[0].RouteRules[0].TableExtractor.TargetColumn = "x"
	if subs[1].RouteRules[0].TableExtractor.TargetColumn != "c_table" || task.Routes["shards"].TableExtractor.TargetColumn != "c_table" {
		t.Error("subtasks share an extractor")
	}
	c := subs[1].Clone()
	c.RouteRules[0].SourceExtractor.SourceRegexp = "y"
	if subs[1].RouteRules[0].SourceExtractor.SourceRegexp != "mysql-(.*)" || c.Equal(subs[1]) {
		t.Error("SubTaskConfig.Clone shares an extractor, or Equal misses the change")
	}
	tc := task.Clone()
	tc.Routes["shards"].SchemaExtractor.TargetColumn = "z"
	if task.Routes["shards"].SchemaExtractor.TargetColumn != "c_schema" {
		t.Error("TaskConfig.Clone shares an extractor")
	}
	// A subtask config keeps them through its own encoding (etcd).
	data, err := subs[1].JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSubTaskConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(subs[1]) {
		t.Errorf("round trip changed the subtask:\n%+v\n%+v", back.RouteRules, subs[1].RouteRules)
	}
}

func TestExtendColumnsValidation(t *testing.T) {
	base := "name: t1\ntask-mode: all\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1, route-rules: [r]}]\n"
	tests := []struct {
		route  string
		fields []string
		text   string
	}{
		{`extract-table: {table-regexp: "t_(.*", target-column: c_table}`, []string{"routes.r.extract-table.table-regexp"}, "regular expression"},
		{`extract-schema: {schema-regexp: "s(.*)"}`, []string{"routes.r.extract-schema.target-column"}, "must name"},
		{`extract-source: {source-regexp: "~(.*)", target-column: c}`, []string{"routes.r.extract-source.source-regexp"}, "leading ~"},
		{`extract-table: {table-regexp: "t_(.*)", target-column: C_X}, extract-source: {source-regexp: "(.*)", target-column: c_x}`,
			[]string{"routes.r.extract-source.target-column"}, "collides with routes.r.extract-table.target-column"},
		{`extract-table: {table-regexp: "(.*)", target-column: "a` + "`" + `b"}`, []string{"routes.r.extract-table.target-column"}, "backtick"},
	}
	for _, tt := range tests {
		in := base + "routes: {r: {schema-pattern: s*, table-pattern: t*, target-schema: db, target-table: t, " + tt.route + "}}\n"
		task, err := ParseTaskConfig([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		err = task.Validate()
		requireProblems(t, err, tt.fields...)
		if !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: error does not say %q:\n%v", tt.route, tt.text, err)
		}
	}
	// A subtask config is validated the same way, naming its rule.
	st := NewSubTaskConfig()
	st.Name, st.SourceID, st.TaskMode = "t1", "s1", ModeFull
	st.TargetDatabase.Host = "h"
	st.RouteRules = []RouteRule{{SchemaPattern: "s*", TargetSchema: "db", SourceExtractor: &SourceExtractor{SourceRegexp: "("}}}
	requireProblems(t, st.Validate(), "route-rules[0].extract-source.target-column", "route-rules[0].extract-source.source-regexp")
}
