package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// collationTaskFile writes a task in mode all over the databases prefix_*
// with the given collation_compatible.
func (f *fullData) collationTaskFile(task, prefix, mode string) string {
	return writeFile(f.t, task+".yaml", fmt.Sprintf(`name: %s
task-mode: all
collation_compatible: %s
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    block-allow-list: mine
    syncer-config-name: small
block-allow-list:
  mine: {do-dbs: ["%s_*"]}
syncers:
  small: {worker-count: 2, batch: 50, checkpoint-flush-interval: 1}
`, task, mode, f.tgt.Port(), fdSource, prefix))
}

// TestCollationCompatible is DM's sync_collation case between two MariaDB
// servers whose defaults differ: the source's collation_server is
// utf8mb4_unicode_ci, the target's latin1_swedish_ci. Two tasks in mode all
// run side by side, one strict (databases s_*) and one loose (l_*):
//   - the dumped database and table end with the source's collation in both
//     modes (MariaDB's SHOW CREATE prints every collation; the load's
//     rewriting of statements without one is unit/load's TestLoadCollations);
//   - a database created during sync without a character set, and a table
//     in it, end with the source's collation_server under strict and with
//     the target's under loose; so does a database created in a session
//     that set its own collation_server (read from the binlog event);
//   - a column with only a character set gets that set's default.
func TestCollationCompatible(t *testing.T) {
	f := startFullDataTo(t,
		mariadbtest.Options{FastCommit: true, ExtraConfig: []string{"character-set-server=utf8mb4", "collation-server=utf8mb4_unicode_ci"}},
		mariadbtest.Options{FastCommit: true, ExtraConfig: []string{"character-set-server=latin1", "collation-server=latin1_swedish_ci"}},
		"", "")
	for _, p := range []string{"s", "l"} {
		f.src.Exec(t, "CREATE DATABASE "+p+"_dump")
		f.src.Exec(t, "CREATE TABLE "+p+"_dump.t (id INT PRIMARY KEY, name VARCHAR(20))")
		f.src.Exec(t, "INSERT INTO "+p+"_dump.t VALUES (1, 'Aa'), (2, 'aA')")
	}
	f.c.ok("task", "start", f.collationTaskFile("strict", "s", "STRICT"))
	f.c.ok("task", "start", f.collationTaskFile("loose", "l", "loose"))
	for _, task := range []string{"strict", "loose"} {
		f.waitSubtask(task, 2*time.Minute, "the task reaches Sync", func(d fdDoc) bool {
			if len(d.Errors) > 0 {
				t.Fatalf("subtask %s failed: %v", task, d)
			}
			return d.Stage == "Running" && d.Unit == "Sync"
		})
	}
	sess := f.src.Session(t, "SET collation_server = utf8mb4_bin")
	for _, p := range []string{"s", "l"} {
		f.src.Exec(t, "CREATE DATABASE "+p+"_sync")
		f.src.Exec(t, "CREATE TABLE "+p+"_sync.t (id INT PRIMARY KEY, name VARCHAR(20), other VARCHAR(20) CHARACTER SET latin1)")
		f.src.Exec(t, "INSERT INTO "+p+"_sync.t VALUES (1, 'Aa', 'x'), (2, 'aA', 'y')")
		if _, err := sess.ExecContext(t.Context(), "CREATE DATABASE "+p+"_sess"); err != nil {
			t.Fatal(err)
		}
		f.src.Exec(t, "CREATE TABLE "+p+"_sess.t (id INT PRIMARY KEY, name VARCHAR(20))")
		f.src.Exec(t, "INSERT INTO "+p+"_sess.t VALUES (1, 'x')")
	}
	for _, p := range []string{"s", "l"} {
		testutil.Eventually(t, time.Minute, "the DDL during sync reaches the target", func() error {
			return f.compare(p+"_sess.t", "SELECT id, name FROM "+p+"_sess.t", "SELECT id, name FROM "+p+"_sess.t")
		})
	}
	upstream := map[string]string{}
	for _, db := range []string{"s_dump", "s_sync", "s_sess"} {
		upstream[db] = f.src.QueryString(t, "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", db)
	}
	if upstream["s_dump"] != "utf8mb4_unicode_ci" || upstream["s_sync"] != "utf8mb4_unicode_ci" || upstream["s_sess"] != "utf8mb4_bin" {
		t.Fatalf("the source's databases have collations %v: the test's premise does not hold", upstream)
	}
	for _, c := range []struct {
		what, q, strict, loose string
	}{
		{"dumped database", "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s_dump'", "utf8mb4_unicode_ci", "utf8mb4_unicode_ci"},
		{"dumped table", "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s_dump' AND TABLE_NAME = 't'", "utf8mb4_unicode_ci", "utf8mb4_unicode_ci"},
		{"dumped column", "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s_dump' AND TABLE_NAME = 't' AND COLUMN_NAME = 'name'", "utf8mb4_unicode_ci", "utf8mb4_unicode_ci"},
		{"database created during sync", "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s_sync'", "utf8mb4_unicode_ci", "latin1_swedish_ci"},
		{"table created during sync", "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s_sync' AND TABLE_NAME = 't'", "utf8mb4_unicode_ci", "latin1_swedish_ci"},
		{"its column", "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s_sync' AND TABLE_NAME = 't' AND COLUMN_NAME = 'name'", "utf8mb4_unicode_ci", "latin1_swedish_ci"},
		{"its latin1 column", "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '%s_sync' AND TABLE_NAME = 't' AND COLUMN_NAME = 'other'", "latin1_swedish_ci", "latin1_swedish_ci"},
		{"database of a session's collation_server", "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s_sess'", "utf8mb4_bin", "latin1_swedish_ci"},
		{"its table", "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '%s_sess' AND TABLE_NAME = 't'", "utf8mb4_bin", "latin1_swedish_ci"},
	} {
		for _, m := range []struct{ prefix, want string }{{"s", c.strict}, {"l", c.loose}} {
			q := fmt.Sprintf(c.q, m.prefix)
			if got := f.tgt.QueryString(t, q); got != m.want {
				t.Errorf("%s (task %s): %s on the target, want %s (%s)", c.what, map[string]string{"s": "strict", "l": "loose"}[m.prefix], got, m.want, q)
			}
		}
	}
	// DM's check: the case-insensitive source collation finds both rows.
	if n := f.tgt.QueryString(t, "SELECT COUNT(*) FROM s_sync.t WHERE name = 'aa'"); n != "2" {
		t.Errorf("strict: %s rows of s_sync.t match 'aa' on the target, want 2", n)
	}
}
