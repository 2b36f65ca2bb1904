package syncer

import (
	"bytes"
	"database/sql"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/unit/unittest"
)

// TestAppendStatement: the text written for each argument type in both
// escape modes, placeholders inside quotes left alone, and every case that
// leaves the query to the driver.
func TestAppendStatement(t *testing.T) {
	args := []any{nil, []byte(nil), []byte{}, []byte("a'b\\c\"d\x00e\nf\rg\x1ah"), "x'y\\z", int64(math.MinInt64),
		uint64(math.MaxUint64), 7, int32(-8), uint32(9), uint(10), 0.1, math.Inf(1) * 0, true, false}
	q := "INSERT INTO `a?``b` VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) /* no */"
	q = q[:len(q)-len(" /* no */")]
	back := "INSERT INTO `a?``b` VALUES (NULL,NULL,_binary'',_binary'a\\'b\\\\c\\\"d\\0e\\nf\\rg\\Zh','x\\'y\\\\z'," +
		"-9223372036854775808,18446744073709551615,7,-8,9,10,0.1,NaN,1,0)"
	quotes := "INSERT INTO `a?``b` VALUES (NULL,NULL,_binary'',_binary'a''b\\c\"d\x00e\nf\rg\x1ah','x''y\\z'," +
		"-9223372036854775808,18446744073709551615,7,-8,9,10,0.1,NaN,1,0)"
	for mode, want := range map[escapeMode]string{escapeBackslash: back, escapeQuotes: quotes} {
		got, ok := appendStatement(nil, stmt{sql: q, args: args}, mode)
		if !ok || string(got) != want {
			t.Errorf("mode %d: appendStatement = %q, %v\nwant %q", mode, got, ok, want)
		}
	}
	refused := []stmt{
		{sql: "SELECT ?", args: []any{time.Now()}},                  // a type the driver writes itself
		{sql: "SELECT ?", args: nil},                                // too few arguments
		{sql: "SELECT ?", args: []any{1, 2}},                        // too many
		{sql: "SELECT ? -- ?", args: []any{1, 2}},                   // a comment
		{sql: "SELECT ? # ?", args: []any{1, 2}},                    // a comment
		{sql: "SELECT /* ? */ ?", args: []any{1, 2}},                // a comment
		{sql: "SELECT '?", args: []any{1}},                          // an open quote
		{sql: "SELECT ?", args: []any{[]string{"no"}}},              // a slice the driver refuses
		{sql: "SELECT ?", args: []any{struct{}{}}},                  // nothing SQL knows
		{sql: "SELECT ?", args: []any{new(int64)}},                  // a pointer (the driver follows it)
		{sql: "SELECT ?", args: []any{sql.NullInt64{Int64: 1}}},     // a Valuer
		{sql: "SELECT ?", args: []any{float32(0.1)}},                // widened by the driver
		{sql: "SELECT ?", args: []any{mysql.NullTime{Valid: true}}}, // a Valuer of a time
	}
	for _, s := range refused {
		if got, ok := appendStatement(nil, s, escapeBackslash); ok {
			t.Errorf("appendStatement(%q, %v) = %q, want it refused", s.sql, s.args, got)
		}
	}
	// A multi-row INSERT's bytes for text columns, up to hexLiteralMax, in
	// hex; an argument after the rows (an upsert's) as usual.
	long := bytes.Repeat([]byte("x"), hexLiteralMax+1)
	ins := stmt{sql: "INSERT INTO t VALUES (?,?,?),(?,?,?) ON DUPLICATE KEY UPDATE v=?", textCols: []bool{false, true, true}, rowArgs: 6,
		args: []any{[]byte("1"), []byte("a'\\b"), []byte(nil), int64(2), []byte{}, long, []byte("z")}}
	want := "INSERT INTO t VALUES (_binary'1',X'61275c62',NULL),(2,X'',_binary'" + string(long) + "') ON DUPLICATE KEY UPDATE v=_binary'z'"
	if got, ok := appendStatement(nil, ins, escapeBackslash); !ok || string(got) != want {
		t.Errorf("INSERT with text columns = %q, %v\nwant %q", got, ok, want)
	}
	// A quoted `?`, a backslash-escaped quote in backslash mode only.
	s := stmt{sql: `SELECT 'it''s ?', "?", 'a\'?', ?`, args: []any{int64(1)}}
	if got, ok := appendStatement(nil, s, escapeBackslash); !ok || string(got) != `SELECT 'it''s ?', "?", 'a\'?', 1` {
		t.Errorf("backslash mode: %q, %v", got, ok)
	}
	if _, ok := appendStatement(nil, s, escapeQuotes); ok {
		t.Errorf("quotes mode: 'a\\' ends the string, so ?' opens one that never closes: want it refused")
	}
}

// TestWriteStatementsLikeJoin: with the values written in, the queries
// are cut where joinStatements cuts them, and a statement that cannot be
// written leaves the whole batch to the driver.
func TestWriteStatementsLikeJoin(t *testing.T) {
	small := stmt{sql: "DELETE FROM t WHERE id=?", args: []any{int64(1)}}
	big := stmt{sql: "INSERT INTO t VALUES (?)", args: []any{bytes.Repeat([]byte("x"), maxJoinedSQL/3)}}
	x := "_binary'" + string(big.args[0].([]byte)) + "'"
	got := joinStatements([]stmt{small, big, big, small}, escapeBackslash)
	want := []string{"BEGIN;DELETE FROM t WHERE id=1;INSERT INTO t VALUES (" + x + ")",
		"INSERT INTO t VALUES (" + x + ");DELETE FROM t WHERE id=1;COMMIT"}
	if len(got) != len(want) {
		t.Fatalf("%d queries, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].sql != want[i] || len(got[i].args) != 0 {
			t.Errorf("query %d: %d bytes with %d args, want %d bytes and none", i, len(got[i].sql), len(got[i].args), len(want[i]))
		}
	}
	odd := stmt{sql: "UPDATE t SET at=? WHERE id=?", args: []any{time.Unix(0, 0), int64(1)}}
	got = joinStatements([]stmt{small, odd}, escapeBackslash)
	if len(got) != 1 || got[0].sql != "BEGIN;DELETE FROM t WHERE id=?;UPDATE t SET at=? WHERE id=?;COMMIT" || len(got[0].args) != 3 {
		t.Errorf("a batch with a time argument = %+v, want the driver's placeholders and 3 args", got)
	}
}

// TestLiteralsReadBack: every literal the unit writes reads back on a real
// server as exactly the value, and as the driver's interpolation of the
// same argument, with and without NO_BACKSLASH_ESCAPES; targetEscapes
// tells the two sessions apart.
func TestLiteralsReadBack(t *testing.T) {
	inst := mariadbtest.Start(t, mariadbtest.Options{Name: "literals"})
	var values []any
	for c := range 256 {
		values = append(values, []byte{byte(c)}, []byte{'a', byte(c), '\'', byte(c), '\\'}, string([]byte{byte(c), 'z'}))
	}
	values = append(values, nil, []byte(nil), []byte{}, "", "é'ü\\😀", []byte{0xe0, '\'', 0xf0, 0x9f, '\\', '\''},
		[]byte{0xff, 0xfe, '\\', 0}, "\\\\'\\", int64(math.MinInt64), int64(math.MaxInt64), uint64(math.MaxUint64),
		0.1, -0.0, 1e300, 5e-324, 1e21, 123456789.125, -2.5e-7, true, false, int(-1), uint32(math.MaxUint32))
	for sqlMode, wantMode := range map[string]escapeMode{
		"'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'": escapeBackslash,
		"'NO_ENGINE_SUBSTITUTION,no_backslash_escapes'":  escapeQuotes,
	} {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net = mariadbtest.RootUser, "tcp"
		cfg.Addr = net.JoinHostPort(inst.Host(), strconv.Itoa(inst.Port()))
		cfg.InterpolateParams = true
		cfg.Params = map[string]string{"sql_mode": sqlMode}
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(connector)
		defer db.Close()
		mode, err := targetEscapes(t.Context(), db)
		if err != nil {
			t.Fatal(err)
		}
		if mode != wantMode {
			t.Fatalf("sql_mode %s: targetEscapes = %d, want %d", sqlMode, mode, wantMode)
		}
		read := func(q string, args ...any) (v []byte, isNull bool) {
			t.Helper()
			var raw sql.RawBytes
			var null bool
			rows, err := db.QueryContext(t.Context(), q, args...)
			if err != nil {
				t.Fatalf("sql_mode %s: %q: %v", sqlMode, q, err)
			}
			defer rows.Close()
			if !rows.Next() {
				t.Fatalf("sql_mode %s: %q: no row: %v", sqlMode, q, rows.Err())
			}
			if err := rows.Scan(&raw, &null); err != nil {
				t.Fatal(err)
			}
			return bytes.Clone(raw), null
		}
		for _, v := range values {
			lit, ok := appendStatement(nil, stmt{sql: "SELECT ?, ? IS NULL", args: []any{v, v}}, mode)
			if !ok {
				t.Fatalf("%T %v: refused", v, v)
			}
			got, gotNull := read(string(lit))
			drv, drvNull := read("SELECT ?, ? IS NULL", v, v)
			if !bytes.Equal(got, drv) || gotNull != drvNull {
				t.Errorf("sql_mode %s, %T %q: our literal reads %q (null %v), the driver's %q (null %v)", sqlMode, v, v, got, gotNull, drv, drvNull)
			}
			switch x := v.(type) {
			case []byte:
				if (x == nil) != gotNull || !bytes.Equal(got, x) {
					t.Errorf("sql_mode %s: %q reads back as %q (null %v)", sqlMode, x, got, gotNull)
				}
			case string:
				if string(got) != x {
					t.Errorf("sql_mode %s: %q reads back as %q", sqlMode, x, got)
				}
			case nil:
				if !gotNull {
					t.Errorf("sql_mode %s: nil reads back as %q", sqlMode, got)
				}
			default:
				if want := fmt.Sprint(v); string(got) != want && !(want == "true" && string(got) == "1") &&
					!(want == "false" && string(got) == "0") {
					if f, ok := v.(float64); !ok || strconv.FormatFloat(f, 'g', -1, 64) != string(got) && !floatReads(got, f) {
						t.Errorf("sql_mode %s: %T %v reads back as %q", sqlMode, v, v, got)
					}
				}
			}
		}
	}
}

// floatReads reports whether the server's text of a DOUBLE is f.
func floatReads(text []byte, f float64) bool {
	g, err := strconv.ParseFloat(string(text), 64)
	return err == nil && g == f
}

// TestQuotesAndBackslashesReplicate: values full of quotes, backslashes and
// control bytes reach the target equal, also when the target's session
// block sets NO_BACKSLASH_ESCAPES (the batches' literals then escape
// quotes only).
func TestQuotesAndBackslashesReplicate(t *testing.T) {
	for _, mode := range []string{"", "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION,NO_BACKSLASH_ESCAPES"} {
		t.Run(fmt.Sprintf("sql_mode=%q", mode), func(t *testing.T) {
			e := newEnv(t, mariadbtest.Options{FastCommit: true})
			cfg, src := e.configs(t, "quotes")
			if mode != "" {
				cfg.TargetDatabase.Session = map[string]string{"sql_mode": mode}
			}
			mariadbtest.MustExec(t, e.srcDB, "CREATE DATABASE app",
				"CREATE TABLE app.q (id INT PRIMARY KEY, s VARCHAR(64), b BLOB, l LONGTEXT CHARACTER SET latin1)")
			u := newUnit(t, cfg, src)
			defer u.Close()
			r := unittest.Start(u, false, 0)
			var rows []string
			for i, v := range []string{`\`, `\\`, `'`, `\'`, `''`, `"\"`, "\x00\\\x00", "\n\r\x1a\t", `a\'b\"c\\`, "é\\ü'"} {
				rows = append(rows, fmt.Sprintf("(%d, %s, %s, %s)", i, hexLit(v), hexLit(v), hexLit(v)))
			}
			// Bulk: one rows event of more than bulkEventRows changes.
			for i := 100; i < 100+2*bulkEventRows; i++ {
				rows = append(rows, fmt.Sprintf("(%d, %s, %s, NULL)", i, hexLit(`x\'`+strconv.Itoa(i)), hexLit("\\\x00")))
			}
			mariadbtest.MustExec(t, e.srcDB, "INSERT INTO app.q VALUES "+strings.Join(rows, ","),
				`UPDATE app.q SET s = CONCAT(s, '\\''') WHERE id < 5`, "DELETE FROM app.q WHERE id = 7")
			e.waitEqual(t, same("app.q"), r)
			if res := r.Stop(t); res.Failed() {
				t.Fatalf("sync unit: %+v", res)
			}
		})
	}
}

// hexLit is s as a hex literal, which reads the same in every sql_mode.
func hexLit(s string) string { return fmt.Sprintf("X'%x'", s) }
