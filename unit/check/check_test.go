package check

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// subtask returns the configs of task t1 of source mysql-01 in mode,
// selecting schema shop of src (as user/password) into tgt.
func subtask(mode string, src, tgt *mariadbtest.Instance, user, password string) (*config.SubTaskConfig, *config.SourceConfig) {
	cfg := &config.SubTaskConfig{
		Name: "t1", SourceID: "mysql-01", TaskMode: mode, MetaSchema: "dm_meta",
		TargetDatabase: config.DBConfig{Host: tgt.Host(), Port: tgt.Port(), User: mariadbtest.RootUser},
		BAList:         config.BAList{DoDBs: []string{"shop"}},
		Meta:           config.Meta{BinlogName: "mariadb-bin.000001", BinlogPos: 4},
	}
	sc := &config.SourceConfig{
		SourceID: "mysql-01", EnableGTID: true,
		From: config.DBConfig{Host: src.Host(), Port: src.Port(), User: user, Password: password},
	}
	return cfg, sc
}

func runCheck(t *testing.T, cfg *config.SubTaskConfig, src *config.SourceConfig) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := Run(ctx, cfg, src)
	doc, _ := json.MarshalIndent(r, "", "  ")
	t.Logf("report:\n%s", doc)
	return r
}

// find returns the items named name.
func find(r *Report, name string) []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Name == name {
			out = append(out, it)
		}
	}
	return out
}

// wantState requires exactly one item named name, in state st, whose
// message contains every part.
func wantState(t *testing.T, r *Report, name string, st State, parts ...string) Item {
	t.Helper()
	its := find(r, name)
	if len(its) != 1 {
		t.Fatalf("%d items named %s, want 1: %+v", len(its), name, its)
	}
	it := its[0]
	if it.State != st {
		t.Errorf("%s: state %s, want %s: %s", name, it.State, st, it.Line())
	}
	for _, p := range parts {
		if !strings.Contains(it.Line(), p) {
			t.Errorf("%s: %q does not contain %q", name, it.Line(), p)
		}
	}
	return it
}

func fast(name string, binlog bool, extra ...string) mariadbtest.Options {
	return mariadbtest.Options{Name: name, Binlog: binlog, FastCommit: true, ExtraConfig: extra}
}

func TestGoodSourcePasses(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE DATABASE other")
	src.Exec(t, "CREATE TABLE shop.orders (id INT PRIMARY KEY, qty INT)")
	src.Exec(t, "CREATE TABLE shop.codes (code VARCHAR(8) NOT NULL, UNIQUE KEY (code))")
	src.Exec(t, "CREATE TABLE shop.events (at DATETIME, what TEXT, UNIQUE KEY (at))") // nullable unique: no key
	src.Exec(t, "CREATE TABLE other.ignored (x INT)")                                 // not selected
	// An existing target table with the source's columns is fine.
	tgt.Exec(t, "CREATE DATABASE shop")
	tgt.Exec(t, "CREATE TABLE shop.orders (id INT(11) PRIMARY KEY, qty INT, total INT AS (qty * 2) VIRTUAL)")

	for _, mode := range []string{config.ModeAll, config.ModeFull, config.ModeIncremental} {
		t.Run(mode, func(t *testing.T) {
			r := runMode(t, mode, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
			if err := r.Err(); err != nil {
				t.Fatalf("Err() = %v, want nil", err)
			}
			if r.Task != "t1" || r.Source != "mysql-01" {
				t.Errorf("report of %s/%s", r.Task, r.Source)
			}
			wantState(t, r, "source_connection", StatePass)
			wantState(t, r, "target_connection", StatePass)
			wantState(t, r, "target_writable", StatePass, "`dm_meta`")
			wantState(t, r, "table_keys", StateWarn, "1 selected table(s)", "`shop`.`events`", "PRIMARY KEY")
			wantState(t, r, "source_tables", StatePass, "3 table(s)")
			wantState(t, r, "target_tables", StatePass, "1 of the 3 selected table(s) route to existing target tables")
			dumps, syncs := mode != config.ModeIncremental, mode != config.ModeFull
			for name, want := range map[string]bool{
				"privilege_select": dumps, "privilege_reload": dumps,
				"privilege_replication_slave": syncs, "privilege_replication_client": syncs,
				"binlog_format": syncs, "binlog_row_image": syncs, "binlog_row_metadata": syncs,
				"log_bin": syncs, "server_id": syncs, "gtid": syncs,
			} {
				if got := len(find(r, name)); got != map[bool]int{true: 1}[want] {
					t.Errorf("mode %s: %d items %s, want %v", mode, got, name, want)
				} else if want {
					wantState(t, r, name, StatePass)
				}
			}
			if n := tgt.QueryString(t, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dm_meta'"); n != "0" {
				t.Errorf("the scratch table is left in dm_meta: %s table(s)", n)
			}
		})
	}
}

// TestBadSourceOneError: a source with binlog_format=STATEMENT and a user
// without REPLICATION CLIENT give one error listing both with their fixes.
func TestBadSourceOneError(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true, "binlog_format=STATEMENT"))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE USER 'nomon'@'%' IDENTIFIED BY 'pw'")
	src.Exec(t, "GRANT REPLICATION SLAVE, SELECT, RELOAD ON *.* TO 'nomon'@'%'")
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.orders (id INT PRIMARY KEY)")

	r := runMode(t, config.ModeAll, src, tgt, "nomon", "pw")
	if fails := r.Failures(); len(fails) != 2 {
		t.Fatalf("%d failures, want 2 (binlog_format, REPLICATION CLIENT): %+v", len(fails), fails)
	}
	wantState(t, r, "binlog_format", StateFail, "source mysql-01 has binlog_format=STATEMENT", "SET GLOBAL binlog_format=ROW", "my.cnf")
	wantState(t, r, "privilege_replication_client", StateFail, "'nomon'@'%'", "REPLICATION CLIENT",
		"BINLOG MONITOR", "fix: GRANT REPLICATION CLIENT ON *.* TO 'nomon'@'%'")
	err := r.Err()
	if err == nil {
		t.Fatal("Err() = nil, want the precheck error")
	}
	if errs.Code(err) != CodePrecheckFailed || errs.IsResumable(err) {
		t.Errorf("Err(): code %q resumable %v, want %q and not resumable", errs.Code(err), errs.IsResumable(err), CodePrecheckFailed)
	}
	for _, want := range []string{"task t1", "source mysql-01", "2 failure(s)",
		"binlog_format=STATEMENT", "fix: SET GLOBAL binlog_format=ROW",
		"lacks REPLICATION CLIENT", "fix: GRANT REPLICATION CLIENT ON *.* TO 'nomon'@'%'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err() text does not contain %q:\n%v", want, err)
		}
	}
	t.Logf("Err():\n%v", err)

	// Full mode reads no binlog: the same source passes.
	if err := runMode(t, config.ModeFull, src, tgt, "nomon", "pw").Err(); err != nil {
		t.Errorf("full mode: Err() = %v, want nil", err)
	}

	// DM's ignore-checking-items: the named items' failures become
	// warnings that say so; the others still fail.
	cfg, sc := subtask(config.ModeAll, src, tgt, "nomon", "pw")
	cfg.IgnoreCheckingItems = []string{"binlog_format"}
	r = runCheck(t, cfg, sc)
	if fails := r.Failures(); len(fails) != 1 || fails[0].Name != "privilege_replication_client" {
		t.Errorf("ignoring binlog_format: failures %+v, want only privilege_replication_client", fails)
	}
	wantState(t, r, "binlog_format", StateWarn, "ignored (ignore-checking-items: binlog_format)", "binlog_format=STATEMENT")
	cfg.IgnoreCheckingItems = []string{"replication_privilege", "binlog_format"}
	if err := runCheck(t, cfg, sc).Err(); err != nil {
		t.Errorf("ignoring both: Err() = %v", err)
	}
	cfg.IgnoreCheckingItems = []string{"all"}
	if r := runCheck(t, cfg, sc); r.Err() != nil || len(r.Warnings()) < 2 {
		t.Errorf("ignoring all: Err() = %v, %d warnings", r.Err(), len(r.Warnings()))
	}
}

// TestTargetTableDiffers: a routed target table with other columns fails
// modes that load and is a warning in incremental mode.
func TestTargetTableDiffers(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.orders_1 (id INT PRIMARY KEY, qty INT, note VARCHAR(20))")
	src.Exec(t, "CREATE TABLE shop.orders_2 (id INT PRIMARY KEY, qty INT, note VARCHAR(20))")
	src.Exec(t, "CREATE TABLE shop.items (id BIGINT PRIMARY KEY, name TEXT)")
	tgt.Exec(t, "CREATE DATABASE merged")
	tgt.Exec(t, "CREATE TABLE merged.orders (id INT PRIMARY KEY, qty BIGINT, comment VARCHAR(20))")
	tgt.Exec(t, "CREATE DATABASE shop")
	tgt.Exec(t, "CREATE TABLE shop.items (id BIGINT PRIMARY KEY, name TEXT)")

	cfg, sc := subtask(config.ModeAll, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	cfg.RouteRules = []config.RouteRule{{SchemaPattern: "shop", TablePattern: "orders_*", TargetSchema: "merged", TargetTable: "orders"}}
	r := runCheck(t, cfg, sc)
	its := find(r, "target_table_schema")
	if len(its) != 2 || len(r.Failures()) != 2 {
		t.Fatalf("want 2 target_table_schema failures (both merged tables) and no other; items %+v, failures %+v", its, r.Failures())
	}
	for i, src := range []string{"`shop`.`orders_1`", "`shop`.`orders_2`"} {
		it := its[i]
		for _, want := range []string{"target table `merged`.`orders`", src,
			"column 2 `qty` is int on the source but bigint on the target",
			"column 3 is `note` varchar(20) on the source but `comment` varchar(20) on the target",
			"fix: drop it on the target (DROP TABLE `merged`.`orders`)"} {
			if !strings.Contains(it.Line(), want) {
				t.Errorf("%q does not contain %q", it.Line(), want)
			}
		}
		if it.State != StateFail || it.Object != "`merged`.`orders`" {
			t.Errorf("item %+v: want a failure on `merged`.`orders`", it)
		}
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "`merged`.`orders`") {
		t.Errorf("Err() = %v, want it to name `merged`.`orders`", err)
	}

	cfg.TaskMode = config.ModeIncremental
	r = runCheck(t, cfg, sc)
	if err := r.Err(); err != nil {
		t.Errorf("incremental: Err() = %v, want nil (a differing target table is a warning there)", err)
	}
	if its := find(r, "target_table_schema"); len(its) != 2 || its[0].State != StateWarn {
		t.Errorf("incremental: want 2 warnings, got %+v", its)
	}
}

// TestUnreachable: a server that cannot be reached is one failure naming
// host:port; the checks that need it are skipped; Err is resumable when
// nothing else failed.
func TestUnreachable(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	tgt := mariadbtest.Start(t, fast("target", false))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	port := testutil.MustFreePort(t)
	addr := "127.0.0.1:" + itoa(port)

	cfg, sc := subtask(config.ModeAll, src, tgt, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	cfg.TargetDatabase.Port = port
	r := runCheck(t, cfg, sc)
	if fails := r.Failures(); len(fails) != 1 {
		t.Fatalf("failures %+v, want only target_connection", fails)
	}
	wantState(t, r, "target_connection", StateFail, "target of task t1 ("+addr+")", "connection refused", "were not run", "fix: start the server at "+addr)
	if len(find(r, "target_writable")) != 0 || len(find(r, "target_tables")) != 0 {
		t.Errorf("checks of the unreachable target ran: %+v", r.Items)
	}
	wantState(t, r, "binlog_format", StatePass)
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), addr) || !errs.IsResumable(err) || errs.Code(err) != CodePrecheckFailed {
		t.Errorf("Err() = %v (resumable %v), want a resumable %s naming %s", err, errs.IsResumable(err), CodePrecheckFailed, addr)
	}

	// Both unreachable: two failures, no other item.
	sc.From.Port = port
	r = runCheck(t, cfg, sc)
	if len(r.Items) != 2 || len(r.Failures()) != 2 {
		t.Errorf("items %+v, want exactly the two connection failures", r.Items)
	}
	wantState(t, r, "source_connection", StateFail, "source mysql-01 ("+addr+")")

	// A wrong password is not cured by retrying.
	sc.From.Port, sc.From.Password = src.Port(), "wrong"
	cfg.TargetDatabase.Port = tgt.Port()
	r = runCheck(t, cfg, sc)
	wantState(t, r, "source_connection", StateFail, "Access denied")
	if err := r.Err(); errs.IsResumable(err) {
		t.Errorf("Err() of a refused login is resumable: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// runMode runs the checks of subtask(mode, ...).
func runMode(t *testing.T, mode string, src, tgt *mariadbtest.Instance, user, password string) *Report {
	t.Helper()
	cfg, sc := subtask(mode, src, tgt, user, password)
	return runCheck(t, cfg, sc)
}

// TestHungTargetIsBounded: a target that accepts connections but never
// answers does not hold Run past its context; the failure names it and
// is retryable.
func TestHungTargetIsBounded(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() { // accept and say nothing
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	port := ln.Addr().(*net.TCPAddr).Port
	cfg, sc := subtask(config.ModeAll, src, src, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	cfg.TargetDatabase.Port = port

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	r := Run(ctx, cfg, sc)
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Run took %v with a 2s context", d)
	}
	wantState(t, r, "target_connection", StateFail, "127.0.0.1:"+itoa(port))
	wantState(t, r, "source_connection", StatePass)
	if err := r.Err(); err == nil || !errs.IsResumable(err) {
		t.Errorf("Err() = %v, want a resumable error", err)
	}
}

// TestBinlogSettings: every binlog setting the sync unit needs is its own
// item; binlog_row_metadata is only a warning, except in optimistic shard
// mode.
func TestBinlogSettings(t *testing.T) {
	// (MariaDB 10.11 raises server_id=0 to 1, so that check cannot fail here.)
	src := mariadbtest.Start(t, fast("source", true, "binlog_row_image=MINIMAL", "binlog_row_metadata=MINIMAL"))
	nobin := mariadbtest.Start(t, fast("nobinlog", false))
	for _, s := range []*mariadbtest.Instance{src, nobin} {
		s.Exec(t, "CREATE DATABASE shop")
		s.Exec(t, "CREATE TABLE shop.orders (id INT PRIMARY KEY)")
	}

	r := runMode(t, config.ModeIncremental, src, nobin, "root", "")
	wantState(t, r, "binlog_row_image", StateFail, "binlog_row_image=MINIMAL", "fix: SET GLOBAL binlog_row_image=FULL")
	wantState(t, r, "server_id", StatePass)
	wantState(t, r, "binlog_row_metadata", StateWarn, "binlog_row_metadata=MINIMAL", "column names", "fix: SET GLOBAL binlog_row_metadata=FULL")
	wantState(t, r, "log_bin", StatePass)
	if n := len(r.Failures()); n != 1 {
		t.Errorf("%d failures, want 1: %+v", n, r.Failures())
	}

	// Optimistic shard mode matches a shard's rows to the merged table by
	// the column names: without them the check fails.
	cfg, sc := subtask(config.ModeIncremental, src, nobin, "root", "")
	cfg.ShardMode = config.ShardOptimistic
	wantState(t, runCheck(t, cfg, sc), "binlog_row_metadata", StateFail, "binlog_row_metadata=MINIMAL", "optimistic needs FULL")

	r = runMode(t, config.ModeIncremental, nobin, src, "root", "")
	wantState(t, r, "log_bin", StateFail, "log_bin=OFF", "restart")

	// In mode all, a source that purges its binlog within a day gets a
	// warning: the sync starts at the snapshot once the load is done.
	if got := len(find(runMode(t, config.ModeIncremental, src, nobin, "root", ""), "binlog_retention")); got != 0 {
		t.Errorf("mode incremental: %d binlog_retention items, want none", got)
	}
	wantState(t, runMode(t, config.ModeAll, src, nobin, "root", ""), "binlog_retention", StatePass, "no expiry")
	src.Exec(t, "SET GLOBAL binlog_expire_logs_seconds = 3600")
	wantState(t, runMode(t, config.ModeAll, src, nobin, "root", ""), "binlog_retention", StateWarn, "older than 1h0m0s", "fix: SET GLOBAL binlog_expire_logs_seconds")
}

// TestPrecheckFunc: the worker's form logs warnings and failures and
// returns Report.Err.
func TestPrecheckFunc(t *testing.T) {
	src := mariadbtest.Start(t, fast("source", true, "binlog_format=MIXED"))
	src.Exec(t, "CREATE DATABASE shop")
	src.Exec(t, "CREATE TABLE shop.log (line TEXT)")
	cfg, sc := subtask(config.ModeAll, src, src, mariadbtest.SourceUser, mariadbtest.SourcePassword)
	core, logs := observer.New(zap.InfoLevel)
	err := Precheck(sc, zap.New(core))(context.Background(), cfg)
	if errs.Code(err) != CodePrecheckFailed || !strings.Contains(err.Error(), "binlog_format=MIXED") {
		t.Fatalf("Precheck() = %v, want the binlog_format failure", err)
	}
	if n := logs.FilterMessage("precheck failure").FilterField(zap.String("check", "binlog_format")).Len(); n != 1 {
		t.Errorf("%d failure logs of binlog_format, want 1", n)
	}
	if n := logs.FilterMessage("precheck warning").FilterField(zap.String("check", "table_keys")).Len(); n != 1 {
		t.Errorf("%d warning logs of table_keys, want 1", n)
	}
	if n := logs.FilterMessage("precheck done").FilterField(zap.String("task", "t1")).Len(); n != 1 {
		t.Errorf("%d 'precheck done' logs, want 1", n)
	}
}
