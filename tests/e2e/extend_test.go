package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// extendTaskFile writes a task in mode all merging s1.t_1 and s2.t_2 of
// the one source into db.t with extend columns c_table, c_schema,
// c_source (DM's extract-table, extract-schema, extract-source).
func (f *fullData) extendTaskFile(task string) string {
	return writeFile(f.t, task+".yaml", fmt.Sprintf(`name: %s
task-mode: all
target-database: {host: 127.0.0.1, port: %d, user: root, password: ""}
mysql-instances:
  - source-id: %s
    block-allow-list: shards
    route-rules: [merge, merge-schema]
    syncer-config-name: small
    mydumper-config-name: chunks
block-allow-list:
  shards: {do-dbs: [s1, s2]}
routes:
  merge:
    schema-pattern: "s*"
    table-pattern: "t_*"
    target-schema: db
    target-table: t
    extract-table: {table-regexp: "t_(.*)", target-column: c_table}
    extract-schema: {schema-regexp: "(.*)", target-column: c_schema}
    extract-source: {source-regexp: "mysql-(.*)", target-column: c_source}
  merge-schema: {schema-pattern: "s*", target-schema: db}
syncers:
  small: {worker-count: 4, batch: 50, checkpoint-flush-interval: 1}
mydumpers:
  chunks: {threads: 2, rows: 500}
`, task, f.tgt.Port(), fdSource))
}

// TestAllModeExtendColumns: two shards on one source whose ids collide
// merge into one table keyed by (id, c_table, c_schema, c_source) through
// the real processes: the load creates the merged table and fills the
// extend columns, and the sync unit's inserts, updates and deletes of
// colliding ids each touch only their shard's row.
func TestAllModeExtendColumns(t *testing.T) {
	f := startFullData(t, mariadbtest.Options{FastCommit: true}, "", "")
	for _, sh := range []string{"s1.t_1", "s2.t_2"} {
		db := strings.Split(sh, ".")[0]
		f.src.Exec(t, "CREATE DATABASE "+db)
		f.src.Exec(t, "CREATE TABLE "+sh+" (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(30))")
		f.src.Exec(t, "INSERT INTO "+sh+" (v) SELECT CONCAT('"+sh+"-', seq) FROM "+db+".seq_1_to_2000")
	}
	f.c.ok("task", "check", f.extendTaskFile("ext"))
	f.c.ok("task", "start", f.extendTaskFile("ext"))
	f.waitSubtask("ext", 2*time.Minute, "the all task reaches Sync", func(d fdDoc) bool {
		if len(d.Errors) > 0 {
			t.Fatalf("subtask failed: %v", d)
		}
		return d.Stage == "Running" && d.Unit == "Sync"
	})
	var name, create string
	if err := f.tgtDB.QueryRow("SHOW CREATE TABLE db.t").Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(create, "PRIMARY KEY (`id`,`c_table`,`c_schema`,`c_source`)") {
		t.Fatalf("the merged table is not keyed by id and the extend columns:\n%s", create)
	}
	for _, q := range []string{
		"UPDATE s1.t_1 SET v = 'one' WHERE id IN (1, 2)",
		"DELETE FROM s2.t_2 WHERE id IN (2, 3)",
		"UPDATE s2.t_2 SET id = 5000 WHERE id = 4",
		"INSERT INTO s1.t_1 (v) VALUES ('new1')",
		"INSERT INTO s2.t_2 VALUES (4, 'back')",
		"CREATE TABLE s2.t_3 (id INT PRIMARY KEY, v VARCHAR(30))",
		"INSERT INTO s2.t_3 VALUES (1, 'third shard')",
	} {
		f.src.Exec(t, q)
	}
	want := "SELECT id, v, '1', 's1', '01' FROM s1.t_1 UNION ALL SELECT id, v, '2', 's2', '01' FROM s2.t_2 " +
		"UNION ALL SELECT id, v, '3', 's2', '01' FROM s2.t_3 ORDER BY 3, 4, 1"
	got := "SELECT id, v, c_table, c_schema, c_source FROM db.t ORDER BY 3, 4, 1"
	testutil.Eventually(t, time.Minute, "db.t equals the union of the shards", func() error {
		return f.compare("db.t", want, got)
	})
}
