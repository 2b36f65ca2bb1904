package dump

import (
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestDumpWhere: mydumper.where dumps only the rows it selects, of keyed
// tables split into many chunks (keyset and range splits), composite keys
// and key-less tables alike; the fingerprint names the condition, so a
// load of a dump taken under another one is refused.
func TestDumpWhere(t *testing.T) {
	src := startSource(t)
	c := rawConn(t, src)
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.big (id INT PRIMARY KEY, v INT)")
	src.Exec(t, "INSERT INTO app.big SELECT seq, seq % 7 FROM app.seq_1_to_5000")
	src.Exec(t, "CREATE TABLE app.comp (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))")
	src.Exec(t, "INSERT INTO app.comp SELECT seq % 50, CONCAT('k', seq), seq % 7 FROM app.seq_1_to_2000")
	src.Exec(t, "CREATE TABLE app.nokey (v INT, w VARCHAR(5))")
	src.Exec(t, "INSERT INTO app.nokey VALUES (1, 'a'), (3, 'b'), (NULL, 'c'), (3, NULL)")
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 4, 300)
	cfg.BAList.DoDBs = []string{"app"}
	cfg.Mydumper.Where = "v = 3 OR v IS NULL"
	dir := t.TempDir() + "/dump"
	m := process(t, newDumper(t, cfg, scfg, dir))
	for name, q := range map[string]string{
		"app.big":   "SELECT * FROM app.big WHERE v = 3 OR v IS NULL",
		"app.comp":  "SELECT * FROM app.comp WHERE v = 3 OR v IS NULL",
		"app.nokey": "SELECT * FROM app.nokey WHERE v = 3 OR v IS NULL",
	} {
		want := sourceRows(t, c, q)
		if len(want) == 0 {
			t.Fatalf("%s: the condition selects nothing", name)
		}
		sameRows(t, name, dumpedRows(t, dir, m, name), want)
	}
	if want := int64(714 + 286 + 3); m.Rows() != want {
		t.Errorf("dumped %d rows, want %d", m.Rows(), want)
	}
	other := *cfg
	other.Mydumper.Where = ""
	if Fingerprint(cfg, scfg) == Fingerprint(&other, scfg) {
		t.Error("the fingerprint does not depend on where")
	}
}
