package validate

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/dbconn"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/filter"
	"github.com/dmworker/dm-worker/pkg/rowimage"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/typestest"
)

// cmpEdgeDDL is a table of edge values the types table lacks, with a
// composite key that includes a VARCHAR.
func cmpEdgeDDL() string {
	members := make([]string, 64)
	for i := range members {
		members[i] = fmt.Sprintf("'m%d'", i)
	}
	return `CREATE TABLE app.edge (id INT, k VARCHAR(20), f FLOAT, d DOUBLE, dbig DOUBLE, de DECIMAL(12,4),
  c CHAR(10), bn BINARY(8), lat VARCHAR(20) CHARACTER SET latin1, u8 TEXT CHARACTER SET utf8mb4,
  dtm DATETIME(6), tm TIME(3), ts TIMESTAMP(3) NULL DEFAULT NULL, dz DATE, e ENUM('x','y'),
  s64 SET(` + strings.Join(members, ",") + `), b1 BIT(1), b64 BIT(64), y YEAR, j JSON, biu BIGINT UNSIGNED,
  PRIMARY KEY (id, k)) DEFAULT CHARSET=utf8mb4`
}

var cmpSetup = []string{
	"CREATE DATABASE app", typestest.DDL("app"), cmpEdgeDDL(),
	"CREATE TABLE app.ci (k VARCHAR(10) PRIMARY KEY, v INT) DEFAULT CHARSET=utf8mb4",
	"CREATE TABLE app.bk (a INT, k BINARY(4), v INT, PRIMARY KEY (a, k))",
}

var cmpEdgeRows = []string{
	`INSERT INTO app.edge VALUES (1, 'a', 1.1, 0.1e0+0.2e0, 1e308, 1.5000, 'ab   ', X'61620000', 'café', '日本😀',
  '2020-01-02 03:04:05.120000', '-12:00:00.500', '2020-01-02 03:04:05.100', '0000-00-00', 'y', 18446744073709551615,
  b'1', 18446744073709551615, 1999, '{"b": 1.50, "a": [true, null]}', 18446744073709551615)`,
	`INSERT INTO app.edge (id, k) VALUES (2, 'B  ')`,
	`INSERT INTO app.edge VALUES (3, 'ü', -0.0, 2.2250738585072014e-308, -1e-300, 0.0000, '', X'', '', '',
  '0000-00-00 00:00:00', '00:00:00', '0000-00-00 00:00:00', '1000-01-01', '', 0, 0, 0, 0, '[]', 0)`,
	`INSERT INTO app.ci VALUES ('abc', 1)`,
	`INSERT INTO app.bk VALUES (1, X'61', 1), (1, X'61620000', 2), (2, X'00000000', 3), (2, X'01020304', 4)`,
}

// cmpTable is one table as the binlog describes it, with its inserted rows
// converted as the sync unit converts them.
type cmpTable struct {
	t    *rowimage.Table
	rows [][]any
}

// cmpChecks are checks expecting every row of ct.
func (ct *cmpTable) cmpChecks() []rowCheck {
	out := make([]rowCheck, len(ct.rows))
	for n, r := range ct.rows {
		out[n] = rowCheck{key: cmpKeyOf(ct.t, r), want: r}
	}
	return out
}

func cmpKeyOf(t *rowimage.Table, row []any) []any {
	key := make([]any, len(t.Key))
	for m, k := range t.Key {
		key[m] = row[k]
	}
	return key
}

// cmpEnv is a source with the test rows in its binlog and a target holding
// them as the sync unit wrote them.
type cmpEnv struct {
	src    *sql.DB // the source, root
	srcEP  *dbconn.Endpoint
	tgt    *sql.DB // root, for DDL
	write  *sql.DB // a pool like the sync unit's
	read   *sql.DB // the validator's pool (openTarget)
	tables map[string]*cmpTable
}

func cmpStart(t *testing.T) *cmpEnv {
	src, tgt := mariadbtest.StartSource(t), mariadbtest.StartTarget(t)
	ctx := t.Context()
	srcDB := src.DB(t)
	conn, err := srcDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stmts := append(append(append([]string{typestest.SQLMode}, cmpSetup...), typestest.Inserts("app")...), cmpEdgeRows...)
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("source: %s: %v", s, err)
		}
	}
	e := &cmpEnv{src: srcDB, tgt: tgt.DB(t)}
	if e.srcEP, err = dbconn.NewEndpoint(config.DBConfig{Host: src.Host(), Port: src.Port(), User: mariadbtest.RootUser},
		dbconn.SourceRef("cmp")); err != nil {
		t.Fatal(err)
	}
	mariadbtest.MustExec(t, e.tgt, cmpSetup...)
	ep, err := dbconn.NewEndpoint(config.DBConfig{Host: tgt.Host(), Port: tgt.Port(), User: mariadbtest.RootUser},
		dbconn.TargetRef("cmp"))
	if err != nil {
		t.Fatal(err)
	}
	if e.read, err = openPool(ep, 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.read.Close() })
	cfg := ep.DriverConfig() // as the sync unit's openTarget
	cfg.InterpolateParams, cfg.ParseTime = true, false
	cfg.Params = map[string]string{"time_zone": "'+00:00'", "sql_mode": "'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'"}
	if e.write, err = ep.Open(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.write.Close() })
	e.tables = cmpReadBinlog(t, src, rowimage.NewTables(e.tgt, filter.NewRouter(nil, "", false)))
	for _, ct := range e.tables {
		for _, r := range ct.rows {
			e.put(t, ct, r)
		}
	}
	return e
}

// cmpReadBinlog decodes the source's binlog files as the sync unit does and
// collects the converted rows of the app tables' inserts.
func cmpReadBinlog(t *testing.T, src *mariadbtest.Instance, tables *rowimage.Tables) map[string]*cmpTable {
	files, err := filepath.Glob(filepath.Join(src.Dir(), "mariadb-bin.[0-9]*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("source binlog files in %s: %v %v", src.Dir(), files, err)
	}
	slices.Sort(files)
	p := replication.NewBinlogParser()
	p.SetFlavor("mariadb")
	p.SetUseDecimal(true)
	p.SetParseTime(false)
	p.SetTimestampStringLocation(time.UTC)
	out := map[string]*cmpTable{}
	onEvent := func(ev *replication.BinlogEvent) error {
		re, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(re.Table.Schema) != "app" {
			return nil
		}
		st, err := tables.Get(t.Context(), re.Table)
		if err != nil {
			return err
		}
		ct := out[string(re.Table.Table)]
		if ct == nil {
			ct = &cmpTable{t: st}
			out[string(re.Table.Table)] = ct
		}
		for _, row := range re.Rows {
			conv, err := st.ConvertRow(row)
			if err != nil {
				return err
			}
			ct.rows = append(ct.rows, conv)
		}
		return nil
	}
	for _, f := range files {
		if err := p.ParseFile(f, 0, onEvent); err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
	}
	for _, name := range []string{"types", "edge", "ci", "bk"} {
		if out[name] == nil {
			t.Fatalf("no rows of app.%s in the binlog", name)
		}
	}
	return out
}

// put writes row to the target as the sync unit writes a row in safe mode.
func (e *cmpEnv) put(t *testing.T, ct *cmpTable, row []any) {
	t.Helper()
	cols := make([]string, len(ct.t.Columns))
	for i, c := range ct.t.Columns {
		cols[i] = sqlschema.QuoteName(c)
	}
	vals := slices.Clone(row)
	q := "REPLACE INTO " + ct.t.Target.String() + " (" + strings.Join(cols, ",") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ")"
	if _, err := e.write.ExecContext(t.Context(), q, vals...); err != nil {
		t.Fatalf("write %s: %v", ct.t.Target, err)
	}
}

// exec runs one statement on the target through the sync unit's pool and
// fails unless it changed exactly one row.
func (e *cmpEnv) exec(t *testing.T, q string) {
	t.Helper()
	res, err := e.write.ExecContext(t.Context(), q)
	if err != nil {
		t.Fatalf("target: %s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("target: %s changed %d rows, want 1", q, n)
	}
}

// cmpKinds runs compare and returns the kinds.
func cmpKinds(t *testing.T, c *comparer, tb *rowimage.Table, checks []rowCheck) ([]string, []rowResult) {
	t.Helper()
	res, err := c.compare(t.Context(), tb, checks)
	if err != nil {
		t.Fatalf("compare %s: %v", tb.Target, err)
	}
	if len(res) != len(checks) {
		t.Fatalf("compare %s: %d results for %d checks", tb.Target, len(res), len(checks))
	}
	kinds := make([]string, len(res))
	for n, r := range res {
		kinds[n] = r.kind
	}
	return kinds, res
}

// cmpExpect checks that only row `only` (-1: none) has kind.
func cmpExpect(t *testing.T, step string, kinds []string, only int, kind string) {
	t.Helper()
	for n, k := range kinds {
		want := ""
		if n == only {
			want = kind
		}
		if k != want {
			t.Errorf("%s: row %d kind %q, want %q (all %q)", step, n, k, want, kinds)
		}
	}
}

// cmpMutation changes one column of one row on the target.
type cmpMutation struct {
	table string
	row   int // index in the table's rows
	set   string
	// where matches the row when the sync unit's key match cannot: a
	// BINARY(n) key whose value ends in zeros (the binlog drops them).
	where string
}

var cmpMutations = func() []cmpMutation {
	typesRow2 := []string{"ti=126", "tiu=254", "si=32766", "siu=65534", "mi=8388606", "miu=16777214",
		"i=2147483646", "iu=4294967294", "bi=9223372036854775806", "biu=18446744073709551614",
		"de='999999999999999999999999999999.9999999998'", "de0=99998", "f=3.4028e38", "d=1.7976931348623155e308",
		"dt='9999-12-30'", "tm='838:59:59.998'", "dtm='9999-12-31 23:59:59.999998'", "dtm0='9999-12-31 23:59:58'",
		"ts='2038-01-19 03:14:07.999998'", "y=2154", "c='zzzzzzzzzZ'", "vc=CONCAT(REPEAT('y', 99), 'Y')",
		"tx=CONCAT(REPEAT('t', 2999), 'T')", "mt=CONCAT(REPEAT('m', 69999), 'n')", "bl=CONCAT(REPEAT(X'FF', 4999), X'FE')",
		"bn=X'FFFFFFFE'", "vb=X'00FF00FF00FF00FF00FE'", "e='b'", "s='x,y'", "b1=0", "b64=18446744073709551614",
		`j='{"a": [1, 2.5, "x"], "b": {"c": 0}}'`, "lat='cafe'", "u8='naive'"}
	edgeRow0 := []string{"k='A'", "f=1.1000002", "d=0.3", "dbig=9.999999999999999e307", "de=1.5001", "c='aB'",
		"bn=X'6163'", "lat='cafè'", "u8='日本😁'", "dtm='2020-01-02 03:04:05.120001'", "tm='-12:00:00.501'",
		"ts='2020-01-02 03:04:05.101'", "dz='2000-01-01'", "e='x'", "s64=s64 & 9223372036854775807", "b1=0",
		"b64=18446744073709551614", "y=2000", `j='{"b": 1.5, "a": [true, null]}'`, "biu=18446744073709551614"}
	var out []cmpMutation
	for _, s := range typesRow2 {
		out = append(out, cmpMutation{"types", 1, s, ""})
	}
	for _, s := range edgeRow0 {
		out = append(out, cmpMutation{"edge", 0, s, ""})
	}
	// Row 3 of types is all NULLs, edge row 2 holds zeros.
	return append(out, cmpMutation{"types", 2, "vb=X''", ""}, cmpMutation{"bk", 1, "v=0", "a=1 AND k=X'61620000'"},
		cmpMutation{"bk", 2, "v=0", "a=2 AND k=X'00000000'"}, cmpMutation{"types", 2, "f=0", ""},
		cmpMutation{"edge", 2, "f=1e-30", ""}, cmpMutation{"edge", 2, "dtm='0000-00-00 00:00:00.000001'", ""},
		cmpMutation{"edge", 2, "e=NULL", ""})
}()

func TestCompare(t *testing.T) {
	e := cmpStart(t)
	full, fast := newComparer(e.read, true), newComparer(e.read, false)
	t.Run("clean", func(t *testing.T) {
		for name, ct := range e.tables {
			for _, c := range []*comparer{full, fast} {
				kinds, res := cmpKinds(t, c, ct.t, ct.cmpChecks())
				cmpExpect(t, "clean "+name, kinds, -1, "")
				for n, r := range res {
					if r.kind != "" {
						t.Errorf("%s row %d differs: %s", name, n, cmpDiff(displayRow(ct.t, ct.rows[n]), r.target))
					}
				}
				for n, r := range res {
					if r.target != nil { // equal rows are not rendered
						t.Errorf("%s row %d: equal row has a target display %q", name, n, r.target)
					}
				}
			}
		}
	})
	t.Run("changed column", func(t *testing.T) { cmpChangedColumns(t, e, full, fast) })
	t.Run("missing and extra", func(t *testing.T) { cmpMissingExtra(t, e, full, fast) })
	t.Run("collation key", func(t *testing.T) { cmpCollationKey(t, e, full, fast) })
	t.Run("display", func(t *testing.T) { cmpDisplay(t, e, full) })
	t.Run("dropped column and table", func(t *testing.T) { cmpDropped(t, e, full) })
}

// cmpChangedColumns changes one column at a time: full mode reports exactly
// that row as different, fast mode nothing.
func cmpChangedColumns(t *testing.T, e *cmpEnv, full, fast *comparer) {
	for _, m := range cmpMutations {
		ct := e.tables[m.table]
		row := ct.rows[m.row]
		w, args := cmpWhere(ct.t, row)
		if m.where != "" {
			w, args = m.where, nil
		}
		q := "UPDATE " + ct.t.Target.String() + " SET " + m.set + " WHERE " + w
		if res, err := e.write.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("target: %s: %v", q, err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("target: %s changed %d rows, want 1", q, n)
		}
		kinds, _ := cmpKinds(t, full, ct.t, ct.cmpChecks())
		cmpExpect(t, "full after "+m.table+" SET "+m.set, kinds, m.row, KindDifferent)
		kinds, _ = cmpKinds(t, fast, ct.t, ct.cmpChecks())
		cmpExpect(t, "fast after "+m.table+" SET "+m.set, kinds, -1, "")
		e.put(t, ct, row)
	}
	kinds, _ := cmpKinds(t, full, e.tables["types"].t, e.tables["types"].cmpChecks())
	cmpExpect(t, "types restored", kinds, -1, "")
}

// cmpDiff lists the columns whose displays differ.
func cmpDiff(src, dst json.RawMessage) string {
	var a, b map[string]*string
	_ = json.Unmarshal(src, &a)
	_ = json.Unmarshal(dst, &b)
	var out []string
	for col, v := range a {
		if w, ok := b[col]; ok && fmt.Sprint(v) != fmt.Sprint(w) && (v == nil || w == nil || *v != *w) {
			out = append(out, fmt.Sprintf("%s: source %q target %q", col, cmpStr(v), cmpStr(w)))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

func cmpStr(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

// cmpWhere matches row's key as the sync unit does.
func cmpWhere(t *rowimage.Table, row []any) (string, []any) {
	var parts []string
	var args []any
	for _, k := range t.Key {
		parts = append(parts, sqlschema.QuoteName(t.Columns[k])+"=?")
		args = append(args, rowimage.WhereValue(row[k], t.Binary[k]))
	}
	return strings.Join(parts, " AND "), args
}

// cmpMissingExtra deletes a target row and checks a deleted source row
// against a present target row.
func cmpMissingExtra(t *testing.T, e *cmpEnv, full, fast *comparer) {
	ct := e.tables["edge"]
	e.exec(t, "DELETE FROM app.edge WHERE id = 2")
	checks := ct.cmpChecks()
	for _, c := range []*comparer{full, fast} {
		kinds, res := cmpKinds(t, c, ct.t, checks)
		cmpExpect(t, "deleted row 2", kinds, 1, KindMissing)
		if res[1].target != nil {
			t.Errorf("missing row has target %s", res[1].target)
		}
	}
	checks[1].want = nil // the source deleted it too: fine
	checks[2].want = nil // the source deleted it, the target has it
	for _, c := range []*comparer{full, fast} {
		kinds, res := cmpKinds(t, c, ct.t, checks)
		cmpExpect(t, "deleted rows 2 and 3 on the source", kinds, 2, KindExtra)
		if !strings.Contains(string(res[2].target), `"id":"3"`) {
			t.Errorf("extra row's target display %s lacks its key", res[2].target)
		}
	}
	e.put(t, ct, ct.rows[1])
}

// cmpCollationKey changes the case of a case-insensitive text key on the
// target: the row is found (its key's collation matches) and differs.
func cmpCollationKey(t *testing.T, e *cmpEnv, full, fast *comparer) {
	ct := e.tables["ci"]
	e.exec(t, "UPDATE app.ci SET k = 'ABC' WHERE k = 'abc'")
	kinds, res := cmpKinds(t, full, ct.t, ct.cmpChecks())
	cmpExpect(t, "full, key case changed", kinds, 0, KindDifferent)
	if got := string(res[0].target); got != `{"k":"ABC","v":"1"}` {
		t.Errorf("target display %s", got)
	}
	kinds, _ = cmpKinds(t, fast, ct.t, ct.cmpChecks())
	cmpExpect(t, "fast, key case changed", kinds, -1, "")
	kinds, _ = cmpKinds(t, full, ct.t, []rowCheck{{key: []any{[]byte("abc")}}})
	cmpExpect(t, "deleted on the source, other case on the target", kinds, 0, KindExtra)
	e.put(t, ct, ct.rows[0])
}

// cmpDisplay checks the operator's view of rows and keys.
func cmpDisplay(t *testing.T, e *cmpEnv, full *comparer) {
	edge := e.tables["edge"]
	var got map[string]*string
	if err := json.Unmarshal(displayRow(edge.t, edge.rows[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": "1", "k": "a", "f": "1.1", "d": "0.30000000000000004", "bn": "0x6162",
		"c": "ab", "s64": "18446744073709551615", "b64": "18446744073709551615", "u8": "日本😀", "e": "2", "y": "1999"}
	for col, w := range want {
		if got[col] == nil || *got[col] != w {
			t.Errorf("displayRow %s = %v, want %q", col, got[col], w)
		}
	}
	if got := string(keyJSON(edge.t, cmpKeyOf(edge.t, edge.rows[1]))); got != `{"id":"2","k":"B  "}` {
		t.Errorf("keyJSON = %s", got)
	}
	types := e.tables["types"]
	if got := string(displayRow(types.t, types.rows[2])); !strings.HasPrefix(got, `{"id":"3","ti":null,`) {
		t.Errorf("displayRow of NULLs = %s", got)
	}
	// A row shown as extra renders the target's values as the source's.
	checks := edge.cmpChecks()
	checks[0].want = nil
	_, res := cmpKinds(t, full, edge.t, checks)
	if string(res[0].target) != string(displayRow(edge.t, edge.rows[0])) {
		t.Errorf("target display\n%s\nwant the source's\n%s", res[0].target, displayRow(edge.t, edge.rows[0]))
	}
}

// cmpDropped drops a column, then a table, on the target.
func cmpDropped(t *testing.T, e *cmpEnv, full *comparer) {
	ct := e.tables["edge"]
	mariadbtest.MustExec(t, e.tgt, "ALTER TABLE app.edge DROP COLUMN j")
	if _, err := full.compare(t.Context(), ct.t, ct.cmpChecks()); errs.Code(err) != CodeCompare || errors.Is(err, errTableGone) {
		t.Errorf("compare with a cached dropped column: %v, want a %s error", err, CodeCompare)
	}
	full.invalidate()
	e.exec(t, "UPDATE app.edge SET f = 2 WHERE id = 1")
	kinds, _ := cmpKinds(t, full, ct.t, ct.cmpChecks())
	cmpExpect(t, "column dropped on the target", kinds, 0, KindDifferent)
	e.exec(t, "UPDATE app.edge SET f = 1.1 WHERE id = 1")
	kinds, _ = cmpKinds(t, full, ct.t, ct.cmpChecks())
	cmpExpect(t, "column dropped on the target", kinds, -1, "")

	mariadbtest.MustExec(t, e.tgt, "DROP TABLE app.edge")
	for _, step := range []string{"cached", "invalidated"} {
		_, err := full.compare(t.Context(), ct.t, ct.cmpChecks())
		if !errors.Is(err, errTableGone) || errs.Code(err) != CodeCompare {
			t.Errorf("%s: compare of a dropped table: %v, want errTableGone", step, err)
		}
		full.invalidate()
	}
}
