package config

import (
	"testing"
)

func TestSubTaskConfigCloneAndEqual(t *testing.T) {
	c, err := ParseSubTaskConfig([]byte(subtaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Clone()
	if !d.Equal(c) || !c.Equal(d) {
		t.Fatal("a clone is not equal")
	}
	changes := []struct {
		name string
		mod  func(*SubTaskConfig)
	}{
		{"ba-list do-dbs", func(x *SubTaskConfig) { x.BAList.DoDBs[0] = "other" }},
		{"ba-list tables", func(x *SubTaskConfig) { x.BAList.DoTables[0].TblName = "x" }},
		{"route", func(x *SubTaskConfig) { x.RouteRules[0].TargetSchema = "x" }},
		{"filter events", func(x *SubTaskConfig) { x.FilterRules[0].Events[0] = "insert" }},
		{"filter sql", func(x *SubTaskConfig) { x.FilterRules[0].SQLPattern[0] = "x" }},
		{"password", func(x *SubTaskConfig) { x.TargetDatabase.Password = "new" }},
		{"syncer", func(x *SubTaskConfig) { x.Syncer.Batch++ }},
	}
	for _, ch := range changes {
		x := c.Clone()
		ch.mod(x)
		if x.Equal(c) {
			t.Errorf("%s: change not detected", ch.name)
		}
		if !d.Equal(c) {
			t.Fatalf("%s: changing a clone changed the original", ch.name)
		}
	}
	// An empty list equals an absent one.
	x := c.Clone()
	x.BAList.IgnoreDBs = []string{}
	if !x.Equal(c) {
		t.Error("empty and nil ignore-dbs differ")
	}
	var nilCfg *SubTaskConfig
	if nilCfg.Equal(c) || c.Equal(nil) || !nilCfg.Equal(nil) {
		t.Error("nil handling")
	}
}

func TestCloneIsDeep(t *testing.T) {
	st, err := ParseStreamConfig([]byte(streamYAML))
	if err != nil {
		t.Fatal(err)
	}
	sc := st.Clone()
	sc.Sink.File.Dir = "other"
	sc.BAList.DoDBs[0] = "other"
	if st.Sink.File.Dir == "other" || st.BAList.DoDBs[0] == "other" || st.Equal(sc) {
		t.Error("stream Clone shares state")
	}

	src, err := ParseSourceConfig([]byte(sourceYAML))
	if err != nil {
		t.Fatal(err)
	}
	s2 := src.Clone()
	s2.From.Port = 1
	if src.From.Port == 1 || src.Equal(s2) || !src.Equal(src.Clone()) {
		t.Error("source Clone/Equal")
	}

	task, err := ParseTaskConfig([]byte(dmTaskYAML))
	if err != nil {
		t.Fatal(err)
	}
	t2 := task.Clone()
	t2.MySQLInstances[0].Meta.BinlogPos = 99
	t2.MySQLInstances[0].RouteRules[0] = "x"
	t2.Filters["filter-rule-1"].Events[0] = "insert"
	t2.Syncers["global"] = SyncerConfig{}
	if task.MySQLInstances[0].Meta.BinlogPos == 99 || task.MySQLInstances[0].RouteRules[0] == "x" ||
		task.Filters["filter-rule-1"].Events[0] == "insert" || task.Syncers["global"].WorkerCount != 32 {
		t.Error("task Clone shares state")
	}

	w := NewWorkerConfig()
	w2 := w.Clone()
	w2.EtcdEndpoints[0] = "x"
	if w.EtcdEndpoints[0] == "x" {
		t.Error("worker Clone shares endpoints")
	}
}
