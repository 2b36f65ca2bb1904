package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
	"github.com/dmworker/dm-worker/unit/load/loadmeta"
	"github.com/dmworker/dm-worker/unit/syncer/syncmeta"
	"github.com/dmworker/dm-worker/unit/validate/validmeta"
)

// metaEnv is an etcd harness with source mysql-01 on a real MariaDB with
// binlog and GTID on, bound to w1; the same server is the tasks' target.
type metaEnv struct {
	*harness
	src *mariadbtest.Instance
	db  *sql.DB
}

func newMetaEnv(t *testing.T) *metaEnv {
	src := mariadbtest.StartSource(t)
	h := newHarness(t)
	h.worker("w1", true)
	h.ok("source", "create", h.file("mysql-01.yaml", fmt.Sprintf(
		"source-id: mysql-01\nenable-gtid: true\nfrom: {host: 127.0.0.1, port: %d, user: root, password: ''}\n", src.Port())), "--worker", "w1")
	return &metaEnv{harness: h, src: src, db: src.DB(t)}
}

// taskFile writes a one-source task file of the given mode and returns
// its path.
func (m *metaEnv) taskFile(name, mode string) string {
	return m.file(name+".yaml", fmt.Sprintf(`name: %s
task-mode: %s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: mysql-01
    block-allow-list: bal
block-allow-list:
  bal: {do-dbs: [shop]}
`, name, mode, m.src.Port()))
}

// serverNow is the source's clock in Unix seconds.
func (m *metaEnv) serverNow() int64 {
	m.t.Helper()
	var n int64
	if err := m.db.QueryRow("SELECT UNIX_TIMESTAMP()").Scan(&n); err != nil {
		m.t.Fatal(err)
	}
	return n
}

// nextSecond waits until the source's clock moves past its current second
// and returns the new second.
func (m *metaEnv) nextSecond() int64 {
	m.t.Helper()
	start := m.serverNow()
	var n int64
	testutil.Eventually(m.t, 10*time.Second, "the source's clock moves past its current second", func() error {
		if n = m.serverNow(); n <= start {
			return fmt.Errorf("the source's clock stayed at %d", start)
		}
		return nil
	})
	return n
}

// mark is where one write starts in the binlog and the second before it.
type mark struct {
	at   int64
	file string
	pos  uint32
	gtid string
}

// write waits for a new second, optionally rotates the binlog, and inserts
// id; it returns the second and the binlog location before the insert.
func (m *metaEnv) write(rotate bool, id int) mark {
	m.t.Helper()
	at := m.nextSecond()
	if rotate {
		m.src.Exec(m.t, "FLUSH BINARY LOGS")
	}
	file, pos, gtid := m.src.MasterStatus(m.t)
	m.src.Exec(m.t, "INSERT INTO shop.t VALUES (?)", id)
	// The insert's group starts at its GTID event; the server may write a
	// binlog checkpoint event after a rotation first.
	rows, err := m.db.Query(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d", file, pos))
	if err != nil {
		m.t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			m.t.Fatal(err)
		}
		if vals[2].String == "Gtid" { // Log_name, Pos, Event_type, ...
			p, _ := strconv.ParseUint(vals[1].String, 10, 32)
			return mark{at: at, file: file, pos: uint32(p), gtid: gtid}
		}
	}
	m.t.Fatalf("no GTID event in %s after %d", file, pos)
	return mark{}
}

// localTime is the source's "2006-01-02 15:04:05" form of a Unix second.
func (m *metaEnv) localTime(unix int64) string {
	m.t.Helper()
	var s string
	if err := m.db.QueryRow("SELECT DATE_FORMAT(FROM_UNIXTIME(?), '%Y-%m-%d %H:%i:%s')", unix).Scan(&s); err != nil {
		m.t.Fatal(err)
	}
	return s
}

func TestTaskStartTime(t *testing.T) {
	m := newMetaEnv(t)
	m.src.Exec(t, "CREATE DATABASE shop")
	m.src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY)")
	a := m.write(false, 1)
	b := m.write(true, 2)
	c := m.write(true, 3)
	if a.file == b.file || b.file == c.file {
		t.Fatalf("FLUSH BINARY LOGS did not rotate: %+v %+v %+v", a, b, c)
	}

	cases := []struct {
		task, at string
		want     mark
	}{
		{"ta", time.Unix(a.at, 0).UTC().Format(time.RFC3339), a},
		{"tb", m.localTime(b.at), b},
		{"tc", strings.Replace(m.localTime(c.at), " ", "T", 1), c},
		// Within b's second: still the first group at or after it.
		{"tb2", time.Unix(b.at, 0).In(time.FixedZone("X", 3600)).Format(time.RFC3339), b},
	}
	for _, k := range cases {
		r := m.ok("task", "start", m.taskFile(k.task, "incremental"), "--start-time", k.at)
		cfg := m.getJSON("/task/config/mysql-01/" + k.task)
		got := fmt.Sprintf("%v:%v gtid %v", field(t, cfg, "meta.binlog-name"), field(t, cfg, "meta.binlog-pos"), field(t, cfg, "meta.binlog-gtid"))
		want := fmt.Sprintf("%s:%d gtid %s", k.want.file, k.want.pos, k.want.gtid)
		if got != want {
			t.Errorf("--start-time %s: meta %s, want %s", k.at, got, want)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("starts at %s:%d (gtid %s)", k.want.file, k.want.pos, k.want.gtid)) {
			t.Errorf("--start-time %s: stderr does not name the location:\n%s", k.at, r.stderr)
		}
	}

	m.fail([]string{"task", "start", m.taskFile("late", "incremental"), "--start-time", time.Unix(c.at+3600, 0).UTC().Format(time.RFC3339)},
		"on source mysql-01", "after the newest binlog event", c.file)
	m.fail([]string{"task", "start", m.taskFile("early", "incremental"), "--start-time", "2001-02-03 04:05:06"},
		"before the oldest binlog file", "choose a later time")
	m.fail([]string{"task", "start", m.taskFile("bad", "incremental"), "--start-time", "yesterday"}, `use "2006-01-02 15:04:05"`)
	m.fail([]string{"task", "start", m.taskFile("full1", "all"), "--start-time", m.localTime(a.at)}, "applies to task-mode incremental", "all")
	m.fail([]string{"task", "start", m.taskFile("dry", "incremental"), "--start-time", m.localTime(a.at), "--dry-run"}, "cannot be combined")
}

// metaTables are the sync and load units' and the validator's tables in
// dm_meta.
var metaTables = slices.Concat(syncmeta.Tables, loadmeta.Tables, validmeta.Tables)

// checkpointRows returns "task/source" of every row in the sync and load
// units' and the validator's tables of dm_meta, sorted, table by table.
func (m *metaEnv) checkpointRows() map[string][]string {
	m.t.Helper()
	out := make(map[string][]string)
	for _, tbl := range metaTables {
		rows, err := m.db.Query("SELECT CONCAT(task, '/', source) FROM dm_meta." + tbl)
		if err != nil {
			m.t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				m.t.Fatal(err)
			}
			out[tbl] = append(out[tbl], s)
		}
		if err := rows.Close(); err != nil {
			m.t.Fatal(err)
		}
		slices.Sort(out[tbl])
	}
	return out
}

// putCheckpoints writes checkpoint, safe-point and table-point rows, load records and
// validator rows of task on sources into tables made by the units' own
// statements.
func (m *metaEnv) putCheckpoints(task string, sources ...string) {
	m.t.Helper()
	ctx := context.Background()
	for _, q := range slices.Concat(syncmeta.CreateStatements("dm_meta"), loadmeta.CreateStatements("dm_meta"), validmeta.CreateStatements("dm_meta")) {
		if _, err := m.db.ExecContext(ctx, q); err != nil {
			m.t.Fatal(err)
		}
	}
	for _, s := range sources {
		m.src.Exec(m.t, "REPLACE INTO dm_meta.syncer_checkpoint (task, source, binlog_name, binlog_pos, binlog_gtid) VALUES (?, ?, 'mariadb-bin.000001', 4, '')", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.syncer_safe_point (task, source, worker, binlog_name, binlog_pos) VALUES (?, ?, 0, 'mariadb-bin.000001', 4)", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.syncer_table_point (task, source, source_schema, source_table, binlog_name, binlog_pos, row_index) VALUES (?, ?, 'shop', 'nokey', 'mariadb-bin.000001', 4, 0)", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.syncer_shard_ddl (task, source, target_schema, target_table, owner_table, seq, stmt, before_hash) VALUES (?, ?, 'm', 't', '`shop`.`t`', 1, 0, REPEAT('0', 64))", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.syncer_shard_schema (task, source, source_schema, source_table, binlog_name, binlog_pos, ddls, create_before, create_after, model_before, model_after) VALUES (?, ?, 'shop', 't', '', 0, '[]', '', 'CREATE TABLE `t` (`id` int)', '', '{}')", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.load_checkpoint (task, source, dump_id, chunk_file, table_schema, table_name, row_count, byte_count) VALUES (?, ?, 'd1', 't00000.000000.tsv', 'shop', 't', 1, 2)", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.load_status (task, source, dump_id, finished) VALUES (?, ?, 'd1', 1)", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.load_index (task, source, table_schema, table_name, indexes) VALUES (?, ?, 'shop', 't', '[]')", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.validator_checkpoint (task, source, binlog_name, binlog_pos, binlog_gtid, rows_checked) VALUES (?, ?, 'mariadb-bin.000001', 4, '', 7)", task, s)
		m.src.Exec(m.t, "REPLACE INTO dm_meta.validator_error (task, source, src_table, target_table, table_hash, row_key, key_hash, kind, state, binlog_name, binlog_pos) "+
			"VALUES (?, ?, 'shop.t', 'shop.t', UNHEX(SHA1('shop.t')), '{\"id\":\"1\"}', UNHEX(SHA1('{\"id\":\"1\"}')), 'missing', 'new', 'mariadb-bin.000001', 4)", task, s)
	}
}

func TestTaskStartRemoveMeta(t *testing.T) {
	m := newMetaEnv(t)
	m.src.Exec(t, "CREATE DATABASE shop")
	m.src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY)")
	a := m.write(false, 1)
	at := time.Unix(a.at, 0).UTC().Format(time.RFC3339)
	m.putCheckpoints("tr", "mysql-01", "mysql-02")
	m.putCheckpoints("other", "mysql-01")
	m.putCheckpoints("tr2", "mysql-01") // a name with tr as a prefix
	all := []string{"other/mysql-01", "tr/mysql-01", "tr/mysql-02", "tr2/mysql-01"}
	others := []string{"other/mysql-01", "tr2/mysql-01"}
	check := func(step string, want []string) {
		t.Helper()
		got := m.checkpointRows()
		for _, tbl := range metaTables {
			if !slices.Equal(got[tbl], want) {
				t.Errorf("%s: rows of %s = %v, want %v", step, tbl, got[tbl], want)
			}
		}
	}

	// The checkpoints would win over --start-time: refused, nothing removed.
	m.fail([]string{"task", "start", m.taskFile("tr", "incremental"), "--start-time", at},
		"task tr has checkpoints", "sources mysql-01, mysql-02", "add --remove-meta")
	check("--start-time without --remove-meta", all)

	r := m.ok("task", "start", m.taskFile("tr", "incremental"), "--start-time", at, "--remove-meta")
	check("--remove-meta", others)
	for _, w := range []string{"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`syncer_checkpoint`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`syncer_safe_point`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`syncer_table_point`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`syncer_shard_ddl`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`load_checkpoint`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`load_status`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`validator_checkpoint`",
		"deleted 2 row(s) of task tr (sources mysql-01, mysql-02) from `dm_meta`.`validator_error`"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("--remove-meta stderr lacks %q:\n%s", w, r.stderr)
		}
	}

	// The task exists in etcd now: --remove-meta is refused and removes
	// nothing, until the task is stopped.
	m.putCheckpoints("tr", "mysql-01")
	m.fail([]string{"task", "start", m.taskFile("tr", "all"), "--remove-meta"}, "task tr already exists", "dmctl task stop tr")
	check("--remove-meta of an existing task", []string{"other/mysql-01", "tr/mysql-01", "tr2/mysql-01"})

	m.ok("task", "stop", "tr")
	r = m.ok("task", "start", m.taskFile("tr", "all"), "--remove-meta")
	check("--remove-meta after stop", others)
	if !strings.Contains(r.stderr, "deleted 1 row(s) of task tr (sources mysql-01)") {
		t.Errorf("--remove-meta stderr:\n%s", r.stderr)
	}
	// remove-meta: true in the task file (DM's deprecated form) does what
	// --remove-meta does, with a warning; the subtask it writes does not
	// carry it, so a worker restart keeps the checkpoints.
	m.ok("task", "stop", "tr")
	m.putCheckpoints("tr", "mysql-01")
	plain, err := os.ReadFile(m.taskFile("tr", "all"))
	if err != nil {
		t.Fatal(err)
	}
	withField := m.file("tr-rm.yaml", "remove-meta: true\n"+string(plain))
	r = m.ok("--output", "json", "task", "start", withField, "--dry-run")
	if !strings.Contains(r.stderr, "would remove the task's checkpoints") || strings.Contains(r.stdout, "remove-meta") {
		t.Errorf("--dry-run of a file with remove-meta: stderr %q, stdout %s", r.stderr, r.stdout)
	}
	check("--dry-run of a file with remove-meta", []string{"other/mysql-01", "tr/mysql-01", "tr2/mysql-01"})
	r = m.ok("task", "start", withField)
	check("remove-meta: true in the file", others)
	if !strings.Contains(r.stderr, "remove-meta: true (deprecated in DM)") || !strings.Contains(r.stderr, "deleted 1 row(s) of task tr (sources mysql-01)") {
		t.Errorf("remove-meta in the file: stderr:\n%s", r.stderr)
	}
	if v, _ := m.get("/task/config/mysql-01/tr"); strings.Contains(v, "remove-meta") {
		t.Errorf("the subtask carries remove-meta: %s", v)
	}

	m.ok("task", "stop", "tr")
	r = m.ok("task", "start", m.taskFile("tr", "all"), "--remove-meta")
	if !strings.Contains(r.stderr, "task tr had no checkpoints") {
		t.Errorf("--remove-meta with nothing to remove: stderr:\n%s", r.stderr)
	}
	check("--remove-meta with nothing to remove", others)
}

// TestStartTimeEncryptedPasswords: source and target passwords stored as
// `dmctl encrypt` ciphertexts are decrypted with --secret-key-path for
// --start-time and --remove-meta; without the key the connection fails
// and the password is not shown.
func TestStartTimeEncryptedPasswords(t *testing.T) {
	const password = "Pw-4c1d'x"
	src := mariadbtest.StartSource(t)
	src.Exec(t, "CREATE USER 'dm'@'127.0.0.1' IDENTIFIED BY 'Pw-4c1d\\'x'")
	src.Exec(t, "GRANT ALL PRIVILEGES ON *.* TO 'dm'@'127.0.0.1'")
	h := newHarness(t)
	key := h.file("key.hex", "")
	h.ok("gen-key", key+".new")
	key += ".new"
	enc := strings.TrimSpace(h.ok("--secret-key-path", key, "encrypt", password).stdout)
	if enc == "" || strings.Contains(enc, password) {
		t.Fatalf("encrypt printed %q", enc)
	}
	h.worker("w1", true)
	h.ok("source", "create", h.file("mysql-01.yaml", fmt.Sprintf(
		"source-id: mysql-01\nfrom: {host: 127.0.0.1, port: %d, user: dm, password: %q}\n", src.Port(), enc)), "--worker", "w1")
	m := &metaEnv{harness: h, src: src, db: src.DB(t)}
	m.src.Exec(t, "CREATE DATABASE shop")
	m.src.Exec(t, "CREATE TABLE shop.t (id INT PRIMARY KEY)")
	a := m.write(false, 1)
	m.putCheckpoints("te", "mysql-01")
	task := h.file("te.yaml", fmt.Sprintf(`name: te
task-mode: incremental
target-database: {host: 127.0.0.1, port: %d, user: dm, password: %q}
mysql-instances:
  - source-id: mysql-01
    block-allow-list: bal
block-allow-list:
  bal: {do-dbs: [shop]}
`, src.Port(), enc))
	at := time.Unix(a.at, 0).UTC().Format(time.RFC3339)

	r := h.fail([]string{"task", "start", task, "--start-time", at, "--remove-meta"},
		`source "mysql-01": connect to`, "Access denied", "from.password has the form of a `dmctl encrypt` ciphertext", "--secret-key-path")
	if strings.Contains(r.stderr, password) {
		t.Errorf("stderr shows the password:\n%s", r.stderr)
	}
	r = h.ok("--secret-key-path", key, "task", "start", task, "--start-time", at, "--remove-meta")
	if !strings.Contains(r.stderr, fmt.Sprintf("starts at %s:%d", a.file, a.pos)) || !strings.Contains(r.stderr, "deleted 1 row(s) of task te") {
		t.Errorf("task start with the key: stderr:\n%s", r.stderr)
	}
	if got := m.checkpointRows()[syncmeta.CheckpointTable]; len(got) != 0 {
		t.Errorf("checkpoint rows after --remove-meta: %v", got)
	}
}
