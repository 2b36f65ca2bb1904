package load

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

func TestSplitIndexes(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		deferred       []string // names
	}{{
		name: "sysbench",
		in: "CREATE TABLE `sbtest1` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `k` int(11) NOT NULL DEFAULT 0,\n" +
			"  PRIMARY KEY (`id`),\n  KEY `k_1` (`k`)\n) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=latin1",
		want: "CREATE TABLE `sbtest1` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `k` int(11) NOT NULL DEFAULT 0,\n" +
			"  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=latin1",
		deferred: []string{"k_1"},
	}, {
		name: "unique, fulltext and a key in the middle",
		in: "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `a` varchar(10) DEFAULT NULL,\n  `b` text,\n  PRIMARY KEY (`id`),\n" +
			"  KEY `a``x` (`a`(3),`id`) COMMENT 'c',\n  UNIQUE KEY `u` (`a`),\n  FULLTEXT KEY `f` (`b`),\n  KEY `ab``` (`a`,`b`(4))\n) ENGINE=InnoDB",
		want: "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `a` varchar(10) DEFAULT NULL,\n  `b` text,\n  PRIMARY KEY (`id`),\n" +
			"  UNIQUE KEY `u` (`a`),\n  FULLTEXT KEY `f` (`b`)\n) ENGINE=InnoDB",
		deferred: []string{"a`x", "ab`"},
	}, {
		name:     "the key an AUTO_INCREMENT column leads stays",
		in:       "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `k` int(11) DEFAULT NULL,\n  KEY `id` (`id`),\n  KEY `k` (`k`)\n) ENGINE=InnoDB",
		want:     "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `k` int(11) DEFAULT NULL,\n  KEY `id` (`id`)\n) ENGINE=InnoDB",
		deferred: []string{"k"},
	}, {
		name: "foreign keys: nothing deferred",
		in:   "CREATE TABLE `c` (\n  `id` int(11) NOT NULL,\n  `p` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `p` (`p`),\n  CONSTRAINT `fk` FOREIGN KEY (`p`) REFERENCES `par` (`id`)\n) ENGINE=InnoDB",
	}, {
		name: "partitioned: nothing deferred",
		in:   "CREATE TABLE `p` (\n  `id` int(11) NOT NULL,\n  `k` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k` (`k`)\n) ENGINE=InnoDB\n PARTITION BY HASH (`id`)\nPARTITIONS 2",
	}, {
		name: "only indexes: nothing deferred",
		in:   "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB",
	}, {
		name: "not the server's text: nothing deferred",
		in:   "CREATE TABLE t (id INT PRIMARY KEY, k INT, KEY (k))",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, idx := splitIndexes(tc.in)
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if got != want {
				t.Errorf("CREATE TABLE:\n%s\nwant\n%s", got, want)
			}
			var names []string
			for _, ix := range idx {
				names = append(names, ix.Name)
				if !strings.HasPrefix(ix.Def, "KEY `") || strings.HasSuffix(ix.Def, ",") {
					t.Errorf("index %s: definition %q", ix.Name, ix.Def)
				}
			}
			if !slices.Equal(names, tc.deferred) {
				t.Errorf("deferred %q, want %q", names, tc.deferred)
			}
		})
	}
}

// TestLoadDeferredIndexes loads tables whose plain secondary indexes are
// deferred: cancelled mid-way, the created table lacks them and the target
// records them; a new unit (as after a crash of the worker) finishes the
// load and adds them, so the target's tables end as the source's, indexes
// included, with nothing left recorded. An ALTER that ran before a crash
// deleted its record is not run twice, and a table that existed before the
// load keeps the indexes it had.
func TestLoadDeferredIndexes(t *testing.T) {
	const perChunk = 10
	e := newEnv(t, true)
	mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
		"CREATE TABLE app.big (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, u INT, v VARCHAR(40), KEY k_1 (k), UNIQUE KEY u (u), KEY kv (k, v))",
		"INSERT INTO app.big (k, u, v) SELECT seq % 97, seq, CONCAT('row-', seq) FROM app.seq_1_to_20000",
		"CREATE TABLE app.mine (id INT PRIMARY KEY, k INT, KEY k (k))",
		"INSERT INTO app.mine SELECT seq, seq % 5 FROM app.seq_1_to_300")
	// app.mine is the user's own table on the target, without the index.
	mariadbtest.MustExec(t, e.dstDB, "CREATE DATABASE app", "CREATE TABLE app.mine (id INT PRIMARY KEY, k INT)")
	dir := t.TempDir()
	m := e.dumpTables(t, dir, "defer", "dump-d", perChunk, tn("app", "big"), tn("app", "mine"))
	cfg, src := e.configs("defer", config.ModeFull, 4)
	indexes := func(table string) []string {
		t.Helper()
		rows, err := e.dstDB.Query("SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'app' AND TABLE_NAME = ?", table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	records := func() int64 {
		return queryInt(t, e.dstDB, "SELECT COUNT(*) FROM dm_meta.load_index WHERE task = 'defer'")
	}

	a := newLoader(t, cfg, src, dir, nil)
	r := unittest.Start(a, false, 0)
	waitChunks(t, a, m.Chunks()/4)
	r.Cancel()
	if res := r.Wait(t, 30*time.Second); !res.IsCanceled || len(res.Errors) > 0 {
		t.Fatalf("cancelled load returned %+v", res)
	}
	if st := a.Status().(Status); st.Finished {
		t.Fatalf("the load finished before it was cancelled (%+v); make the dump bigger", st)
	}
	if got, want := indexes("big"), []string{"PRIMARY", "u"}; !slices.Equal(got, want) {
		t.Fatalf("indexes of app.big mid-load: %q, want %q (k_1 and kv deferred)", got, want)
	}
	if n := records(); n != 1 {
		t.Fatalf("%d deferred-index records mid-load, want 1 (app.big)", n)
	}
	a.Kill()

	b := newLoader(t, cfg, src, dir, nil)
	requireOK(t, process(t, b))
	b.Close()
	e.exactlyOnce(t, "at the end", "defer", perChunk, "app.big", "app.mine")
	e.requireEqual(t, "app.big", "app.big")
	e.requireEqual(t, "app.mine", "app.mine")
	if got, want := indexes("big"), []string{"PRIMARY", "k_1", "kv", "u"}; !slices.Equal(got, want) {
		t.Errorf("indexes of app.big after the load: %q, want %q", got, want)
	}
	showCreate := func(db *sql.DB) string {
		t.Helper()
		var name, ddl string
		if err := db.QueryRow("SHOW CREATE TABLE app.big").Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		return regexp.MustCompile(` AUTO_INCREMENT=[0-9]+`).ReplaceAllString(ddl, "")
	}
	if srcDDL, dstDDL := showCreate(e.srcDB), showCreate(e.dstDB); srcDDL != dstDDL {
		t.Errorf("app.big on the target:\n%s\nsource:\n%s", dstDDL, srcDDL)
	}
	if got, want := indexes("mine"), []string{"PRIMARY"}; !slices.Equal(got, want) {
		t.Errorf("indexes of the user's app.mine: %q, want %q (left as it was)", got, want)
	}
	if n := records(); n != 0 {
		t.Errorf("%d deferred-index records after the load, want none", n)
	}

	// A crash after the ALTER TABLE and before its record was deleted:
	// the next run finds the indexes there and only deletes the record.
	c := newLoader(t, cfg, src, dir, nil)
	defer c.Close()
	plan := &tablePlan{target: tn("app", "big"), indexes: &tableIndexes{list: []deferredIndex{{Name: "k_1", Def: "KEY `k_1` (`k`)"}}}}
	if err := c.store.recordIndexes(context.Background(), c.db, plan.target, plan.indexes.list); err != nil {
		t.Fatal(err)
	}
	if err := c.addIndexes(context.Background(), plan); err != nil {
		t.Fatalf("addIndexes with the index there already: %v", err)
	}
	if n := records(); n != 0 || !plan.indexes.added.Load() {
		t.Errorf("after addIndexes: %d records, added %v; want 0, true", n, plan.indexes.added.Load())
	}
}
