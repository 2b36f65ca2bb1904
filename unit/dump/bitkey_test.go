package dump

import (
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// TestDumpBitKey splits tables keyed by BIT(8) and BIT(64), values past
// 2^53 included (where a hex literal would compare as a double), into
// keyset chunks and checks that every row is dumped once. The dump used to
// dump such tables as one chunk; sqlschema's keyset writes BIT cursors as
// decimal numbers, which compare exactly.
func TestDumpBitKey(t *testing.T) {
	src := startSource(t)
	c := rawConn(t, src)
	src.Exec(t, "CREATE DATABASE app")
	src.Exec(t, "CREATE TABLE app.b8 (b BIT(8) PRIMARY KEY, v INT)")
	src.Exec(t, "INSERT INTO app.b8 SELECT seq, seq FROM app.seq_0_to_255")
	src.Exec(t, "CREATE TABLE app.b64 (b BIT(64) NOT NULL, v INT, UNIQUE KEY ub (b))")
	src.Exec(t, "INSERT INTO app.b64 SELECT 0xFFFFFFFFFFFFFFFF - seq, seq FROM app.seq_0_to_299")
	src.Exec(t, "INSERT INTO app.b64 SELECT seq, seq FROM app.seq_0_to_99")
	cfg, scfg := configs(src, mariadbtest.SourceUser, mariadbtest.SourcePassword, 2, 64)
	cfg.BAList.DoDBs = []string{"app"}
	dir := t.TempDir() + "/dump"
	m := process(t, newDumper(t, cfg, scfg, dir))
	for name, want := range map[string]struct {
		key    string
		chunks int
	}{"app.b8": {"b", 5}, "app.b64": {"b", 7}} {
		tbl := manifestTable(t, m, name)
		if got := strings.Join(tbl.KeyColumns, ","); got != want.key || len(tbl.Chunks) != want.chunks {
			t.Errorf("%s: key %q in %d chunks, want %q in %d", name, got, len(tbl.Chunks), want.key, want.chunks)
		}
		sameRows(t, name, dumpedRows(t, dir, m, name), sourceRows(t, c, "SELECT CAST(b AS UNSIGNED), v FROM "+name))
	}
}
