package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSourceAndTargetLifecycle(t *testing.T) {
	t.Parallel()
	began := time.Now()
	src := StartSource(t)
	srcStarted := time.Since(began)
	tgt := StartTarget(t)
	t.Logf("instance start: source %v, target %v", srcStarted.Round(time.Millisecond), (time.Since(began) - srcStarted).Round(time.Millisecond))

	if src.ServerID() == tgt.ServerID() {
		t.Fatalf("source and target share server_id %d", src.ServerID())
	}
	if src.Port() == tgt.Port() || src.Port() == 3306 || tgt.Port() == 3306 {
		t.Fatalf("ports: source %d, target %d; want two distinct ports other than 3306", src.Port(), tgt.Port())
	}
	for _, c := range []struct {
		inst        *Instance
		query, want string
	}{
		{src, "SELECT @@log_bin", "1"},
		{src, "SELECT @@binlog_format", "ROW"},
		{src, "SELECT @@binlog_row_image", "FULL"},
		{src, "SELECT @@binlog_row_metadata", "FULL"},
		{src, "SELECT @@log_slave_updates", "1"},
		{src, "SELECT @@binlog_checksum", "CRC32"},
		{src, "SELECT @@sync_binlog", "1"},
		{src, "SELECT @@innodb_flush_log_at_trx_commit", "1"},
		{src, "SELECT @@server_id", strconv.Itoa(int(src.ServerID()))},
		{src, "SELECT @@character_set_server", "utf8mb4"},
		{src, "SELECT @@bind_address", "127.0.0.1"},
		{src, "SELECT @@skip_name_resolve", "1"},
		{src, "SELECT @@datadir", filepath.Join(src.Dir(), "data") + "/"},
		{tgt, "SELECT @@log_bin", "0"},
		{tgt, "SELECT @@server_id", strconv.Itoa(int(tgt.ServerID()))},
		{tgt, "SELECT @@max_connections", "500"},
		{tgt, "SELECT @@performance_schema", "0"},
		{tgt, "SELECT CURRENT_USER()", "root@127.0.0.1"},
	} {
		if got := c.inst.QueryString(t, c.query); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.inst.Name(), c.query, got, c.want)
		}
	}

	file0, pos0, _ := src.MasterStatus(t)
	src.Exec(t, "CREATE DATABASE lifecycle")
	src.Exec(t, "CREATE TABLE lifecycle.t (id INT PRIMARY KEY, v VARCHAR(32))")
	for k := 1; k <= 100; k++ {
		src.Exec(t, "INSERT INTO lifecycle.t VALUES (?, ?)", k, "row-"+strconv.Itoa(k))
	}
	file1, pos1, gtid1 := src.MasterStatus(t)
	if file1 == file0 && pos1 <= pos0 {
		t.Fatalf("binlog position did not advance: %s:%d then %s:%d", file0, pos0, file1, pos1)
	}
	if want := "0-" + strconv.Itoa(int(src.ServerID())) + "-102"; gtid1 != want {
		t.Errorf("gtid_binlog_pos = %q, want %q (2 DDL + 100 inserts)", gtid1, want)
	}

	// The DM source user can connect and read the binlog position.
	dmDB, err := sql.Open("mysql", src.UserDSN(SourceUser, SourcePassword, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer dmDB.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var f, p, doDB, ignoreDB string
	if err := dmDB.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&f, &p, &doDB, &ignoreDB); err != nil {
		t.Fatalf("SHOW MASTER STATUS as %s: %v", SourceUser, err)
	}
	if _, err := dmDB.ExecContext(ctx, "CREATE DATABASE forbidden"); err == nil {
		t.Errorf("%s could create a database; it should have only the DM source grants", SourceUser)
	}

	// The client arguments reach this server and no other.
	out, err := exec.CommandContext(ctx, Program(t, "mariadb"), append(src.ClientArgs(), "-N", "-e", "SELECT COUNT(*) FROM lifecycle.t")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "100" {
		t.Errorf("mariadb %v: %v, output %q, want 100", src.ClientArgs(), err, out)
	}

	// A crash and a restart keep the committed rows and the port.
	port := src.Port()
	src.Kill(t)
	if src.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if pids := serverPIDs(t, src.Dir()); len(pids) != 0 {
		t.Fatalf("mariadbd pids %v still run in %s after Kill", pids, src.Dir())
	}
	src.Restart(t)
	if !src.Running() || src.Port() != port {
		t.Fatalf("after Restart: running %v, port %d, want running on %d", src.Running(), src.Port(), port)
	}
	if got := src.QueryString(t, "SELECT COUNT(*) FROM lifecycle.t"); got != "100" {
		t.Fatalf("rows after kill -9 and restart = %s, want 100", got)
	}
	if _, pos2, gtid2 := src.MasterStatus(t); gtid2 != gtid1 || pos2 == 0 {
		t.Errorf("after restart: gtid %q pos %d, want gtid %q", gtid2, pos2, gtid1)
	}

	src.Stop(t)
	tgt.Stop(t)
	for _, inst := range []*Instance{src, tgt} {
		if inst.Running() {
			t.Errorf("%s: Running() = true after Stop", inst.Name())
		}
		if pids := serverPIDs(t, inst.Dir()); len(pids) != 0 {
			t.Errorf("%s: mariadbd pids %v still run in %s after Stop", inst.Name(), pids, inst.Dir())
		}
		if !strings.Contains(inst.ErrorLogTail(5), "Shutdown complete") {
			t.Errorf("%s: error log does not end with a clean shutdown:\n%s", inst.Name(), inst.ErrorLogTail(5))
		}
	}
}

func TestOptionsReachTheServer(t *testing.T) {
	t.Parallel()
	inst := Start(t, Options{
		Name:          "options",
		Binlog:        true,
		ServerID:      4242,
		GTIDDomainID:  7,
		MaxBinlogSize: 8192,
		FastCommit:    true,
		ExtraConfig:   []string{"max_connections=123"},
	})
	for query, want := range map[string]string{
		"SELECT @@server_id":                      "4242",
		"SELECT @@gtid_domain_id":                 "7",
		"SELECT @@max_binlog_size":                "8192",
		"SELECT @@innodb_flush_log_at_trx_commit": "2",
		"SELECT @@sync_binlog":                    "0",
		"SELECT @@max_connections":                "123",
	} {
		if got := inst.QueryString(t, query); got != want {
			t.Errorf("%s = %q, want %q", query, got, want)
		}
	}
	// A small max_binlog_size rotates the binlog as rows are written.
	inst.Exec(t, "CREATE DATABASE opts")
	inst.Exec(t, "CREATE TABLE opts.t (id INT PRIMARY KEY, pad CHAR(200))")
	for k := 0; k < 100; k++ {
		inst.Exec(t, "INSERT INTO opts.t VALUES (?, REPEAT('x', 200))", k)
	}
	file, _, gtid := inst.MasterStatus(t)
	if file == "mariadb-bin.000001" {
		t.Errorf("binlog did not rotate with max_binlog_size=8192: still on %s", file)
	}
	if !strings.HasPrefix(gtid, "7-4242-") {
		t.Errorf("gtid_binlog_pos = %q, want domain 7, server 4242", gtid)
	}
	if _, err := os.Stat(filepath.Join(inst.Dir(), file)); err != nil {
		t.Errorf("current binlog is not in the instance directory: %v", err)
	}
}

func TestCleanupKillsTheServer(t *testing.T) {
	t.Parallel()
	var dir string
	t.Run("leaves its server running", func(t *testing.T) {
		inst := StartTarget(t)
		dir = inst.Dir()
		if len(serverPIDs(t, dir)) != 1 {
			t.Fatalf("want exactly one mariadbd in %s", dir)
		}
	})
	if dir == "" {
		t.Fatal("the subtest did not start an instance")
	}
	if pids := serverPIDs(t, dir); len(pids) != 0 {
		t.Errorf("mariadbd pids %v survived the cleanup of the test that started them", pids)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance directory %s survived cleanup: %v", dir, err)
	}
}

// serverPIDs scans /proc for processes whose command line mentions dir.
func serverPIDs(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("scan /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil { // the process exited while we looked
			continue
		}
		if strings.Contains(string(cmdline), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestStartFailureShowsTheErrorLog(t *testing.T) {
	t.Parallel()
	r := &endRecorder{TB: t}
	r.run(func() { Start(r, Options{Name: "broken", ExtraConfig: []string{"no_such_variable=1"}}) })
	fatal, _ := r.messages()
	for _, want := range []string{`instance "broken"`, "did not come up", "exited during start-up", "unknown variable 'no_such_variable=1'"} {
		if !strings.Contains(fatal, want) {
			t.Errorf("failure message lacks %q:\n%s", want, fatal)
		}
	}
}
