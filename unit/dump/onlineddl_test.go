package dump

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// TestDumpOnlineDDLTables: with online-ddl on, the shadow and trash tables
// of gh-ost and pt-osc are never dumped, even where the block-allow list
// names them, and each is logged once with its real table; with it off
// they are dumped like any table, and switching it discards the finished
// dump.
func TestDumpOnlineDDLTables(t *testing.T) {
	src := startSource(t)
	src.Exec(t, "CREATE DATABASE app")
	tools := []string{"_t_gho", "_t_new", "_t_del", "_t_ghc", "_t_old"}
	for _, n := range append([]string{"t", "_x_gho_", "t_gho"}, tools...) {
		src.Exec(t, "CREATE TABLE app."+n+" (id INT PRIMARY KEY, v INT)")
		src.Exec(t, "INSERT INTO app."+n+" SELECT seq, seq FROM app.seq_1_to_30")
	}
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 10)
	cfg.BAList.DoDBs = []string{"app"}
	dir := t.TempDir() + "/dump"

	run := func(cfg *config.SubTaskConfig) (*dumpfile.Manifest, *observer.ObservedLogs) {
		t.Helper()
		core, logs := observer.New(zap.InfoLevel)
		logger := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
		d, err := New(cfg, scfg, dir, NewMetrics(nil), logger)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.Init(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		defer cancel()
		if res := d.Process(ctx); res.Failed() || res.IsCanceled {
			t.Fatalf("Process = %+v", res)
		}
		m, err := dumpfile.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		return m, logs
	}
	names := func(m *dumpfile.Manifest) string {
		var out []string
		for _, tbl := range m.Tables {
			out = append(out, tbl.Schema+"."+tbl.Name)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	skips := func(logs *observer.ObservedLogs) []string {
		var out []string
		for _, e := range logs.FilterMessageSnippet("gh-ost/pt-osc").All() {
			if e.Level != zap.InfoLevel {
				t.Errorf("%q logged at %v, want info", e.Message, e.Level)
			}
			out = append(out, e.Message)
		}
		slices.Sort(out)
		return out
	}
	wantSkips := []string{
		"the dump skips gh-ost/pt-osc table `app`.`_t_del` (trash of `t`)",
		"the dump skips gh-ost/pt-osc table `app`.`_t_ghc` (trash of `t`)",
		"the dump skips gh-ost/pt-osc table `app`.`_t_gho` (shadow of `t`)",
		"the dump skips gh-ost/pt-osc table `app`.`_t_new` (shadow of `t`)",
		"the dump skips gh-ost/pt-osc table `app`.`_t_old` (trash of `t`)",
	}

	on := *cfg
	on.OnlineDDL = true
	m, logs := run(&on)
	if got := names(m); got != "app._x_gho_,app.t,app.t_gho" {
		t.Fatalf("online-ddl on: dumped %s, want app._x_gho_,app.t,app.t_gho", got)
	}
	if got := skips(logs); !slices.Equal(got, wantSkips) {
		t.Errorf("online-ddl on: skip logs\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(wantSkips, "\n "))
	}
	if n := len(dumpedRows(t, dir, m, "app.t")); n != 30 {
		t.Errorf("app.t: %d rows dumped, want 30", n)
	}
	onID := m.DumpID

	// Off: every table, a new dump (the finished one lacks five tables).
	m, logs = run(cfg)
	if got, want := names(m), "app._t_del,app._t_ghc,app._t_gho,app._t_new,app._t_old,app._x_gho_,app.t,app.t_gho"; got != want {
		t.Fatalf("online-ddl off: dumped %s, want %s", got, want)
	}
	if m.DumpID == onID {
		t.Errorf("online-ddl off reused dump %s taken with it on", onID)
	}
	if got := skips(logs); len(got) != 0 {
		t.Errorf("online-ddl off logged skips: %q", got)
	}
	if got := logs.FilterMessageSnippet("online-ddl").All(); len(got) != 1 || !strings.Contains(got[0].Message, "discarding it and dumping again") {
		t.Errorf("online-ddl off: logs naming online-ddl %+v, want the discarded dump", got)
	}

	// On again, with a block-allow list that names a shadow table: still
	// skipped; the trash tables, not selected, are not logged.
	on.BAList = config.BAList{DoTables: []config.TableRef{{DBName: "app", TblName: "t"}, {DBName: "app", TblName: "_t_gho"}}}
	m, logs = run(&on)
	if got := names(m); got != "app.t" {
		t.Fatalf("online-ddl on, do-tables t and _t_gho: dumped %s, want app.t", got)
	}
	if got := skips(logs); !slices.Equal(got, wantSkips[2:3]) {
		t.Errorf("online-ddl on, do-tables t and _t_gho: skip logs %q, want %q", got, wantSkips[2:3])
	}

	// Custom rules: only what they name is skipped.
	on.BAList = config.BAList{DoDBs: []string{"app"}}
	on.ShadowTableRules = []string{`^(.+)_gho$`}
	on.TrashTableRules = []string{`^_(.+)_old$`}
	m, logs = run(&on)
	if got, want := names(m), "app._t_del,app._t_ghc,app._t_new,app._x_gho_,app.t"; got != want {
		t.Fatalf("custom rules: dumped %s, want %s", got, want)
	}
	want := []string{
		"the dump skips gh-ost/pt-osc table `app`.`_t_gho` (shadow of `_t`)",
		"the dump skips gh-ost/pt-osc table `app`.`_t_old` (trash of `t`)",
		"the dump skips gh-ost/pt-osc table `app`.`t_gho` (shadow of `t`)",
	}
	if got := skips(logs); !slices.Equal(got, want) {
		t.Errorf("custom rules: skip logs %q, want %q", got, want)
	}
}

// TestFingerprintOnlineDDL: the online-ddl part is absent with online-ddl
// off (older dumps keep their fingerprint), and names the change.
func TestFingerprintOnlineDDL(t *testing.T) {
	src := &config.SourceConfig{From: config.DBConfig{Host: "127.0.0.1", Port: 3306}}
	off := &config.SubTaskConfig{BAList: config.BAList{DoDBs: []string{"app"}}}
	if fp := Fingerprint(off, src); strings.Contains(fp, FingerprintOnlineDDL+"=") {
		t.Errorf("online-ddl off: fingerprint %s has an online-ddl part", fp)
	}
	on := *off
	on.OnlineDDL = true
	explicit := on
	explicit.ShadowTableRules = []string{`^_(.+)_(?:new|gho)$`}
	other := on
	other.TrashTableRules = []string{`^_(.+)_del$`}
	if Fingerprint(&on, src) != Fingerprint(&explicit, src) {
		t.Errorf("the default rules spelt out change the fingerprint: %s, %s", Fingerprint(&on, src), Fingerprint(&explicit, src))
	}
	for _, c := range []struct {
		a, b *config.SubTaskConfig
	}{{off, &on}, {&on, &other}} {
		got := Changed(Fingerprint(c.a, src), Fingerprint(c.b, src))
		if !slices.Equal(got, []string{"online-ddl (or its shadow-table-rules and trash-table-rules)"}) {
			t.Errorf("Changed(%s, %s) = %q", Fingerprint(c.a, src), Fingerprint(c.b, src), got)
		}
	}
}
