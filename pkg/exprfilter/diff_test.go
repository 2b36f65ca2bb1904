package exprfilter

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// The differential test: a generated corpus of expressions over a table
// with a column of every type, evaluated by MariaDB and by Eval on the
// same rows as the binlog decoder delivers them (read back through a
// binlog stream of the server, with the settings of pkg/binlog/upstream).
//
// EXPR_DIFF_N sets the number of expressions (default 400: about 20,000
// expression x row pairs, a few seconds); EXPR_DIFF_SEED the first seed
// (default 1); `make fuzz` runs it with EXPR_DIFF_N=20000.

// diffColumn is one column of the differential table: its DDL, its
// generator class and the SQL literals its rows take.
type diffColumn struct {
	name, ddl, class string
	values           []string
}

const (
	clsInt  = "int"
	clsDec  = "dec"
	clsFlt  = "flt"
	clsStr  = "str"
	clsBin  = "bin"
	clsDate = "date"
	clsDT   = "dt"
	clsTime = "time"
	clsJSON = "json"
)

var diffColumns = []diffColumn{
	{"ti", "TINYINT", clsInt, []string{"0", "1", "-1", "127", "-128", "7", "42"}},
	{"tiu", "TINYINT UNSIGNED", clsInt, []string{"0", "1", "255", "128", "7"}},
	{"si", "SMALLINT", clsInt, []string{"0", "-32768", "32767", "-7", "300"}},
	{"siu", "SMALLINT UNSIGNED", clsInt, []string{"0", "65535", "32768", "10"}},
	{"mi", "MEDIUMINT", clsInt, []string{"0", "-8388608", "8388607", "-1", "1000"}},
	{"miu", "MEDIUMINT UNSIGNED", clsInt, []string{"0", "16777215", "8388608", "5"}},
	{"i", "INT", clsInt, []string{"0", "-2147483648", "2147483647", "-3", "7", "20200102"}},
	{"iu", "INT UNSIGNED", clsInt, []string{"0", "4294967295", "2147483648", "9"}},
	{"bi", "BIGINT", clsInt, []string{"0", "-9223372036854775808", "9223372036854775807", "-1", "1", "20200102030405"}},
	{"biu", "BIGINT UNSIGNED", clsInt, []string{"0", "18446744073709551615", "9223372036854775808", "2"}},
	{"y", "YEAR", clsInt, []string{"2020", "1901", "2155", "0", "1999"}},
	{"bt", "BIT(8)", clsInt, []string{"b'0'", "b'1'", "b'11111111'", "b'101'"}},
	{"dc", "DECIMAL(10,2)", clsDec, []string{"0.00", "12.50", "-12.50", "99999999.99", "-0.01", "7.00", "0.33"}},
	{"dcw", "DECIMAL(30,10) UNSIGNED", clsDec, []string{"0", "1.0000000001", "12345678901234567890.1234567890", "0.5"}},
	{"dc0", "DECIMAL(18,0)", clsDec, []string{"0", "-999999999999999999", "7", "100"}},
	{"fl", "FLOAT", clsFlt, []string{"0", "1.5", "-2.25", "100", "0.5", "3"}},
	{"db", "DOUBLE", clsFlt, []string{"0", "2.5", "-1e300", "1e-5", "0.1", "7", "123456.789"}},
	{"c", "CHAR(10) COLLATE utf8mb4_general_ci", clsStr, []string{"''", "'a'", "'A'", "'abc'", "'Abc'", "'é'", "'e'", "'7'", "' x'", "'10'"}},
	{"vc", "VARCHAR(20) COLLATE utf8mb4_general_ci", clsStr, []string{"''", "'abc'", "'ABC '", "'abc  '", "'Ünïcode'", "'unicode'", "'12abc'", "'1e2'", "'x%y'", "'a_c'", "'-3.5'"}},
	{"vb", "VARCHAR(20) COLLATE utf8mb4_bin", clsStr, []string{"''", "'abc'", "'ABC'", "'abc '", "'é'", "'E'", "'Zed'", "'42'"}},
	{"vu", "VARCHAR(20) COLLATE utf8mb4_unicode_ci", clsStr, []string{"''", "'abc'", "'ÀBC'", "'Ab c'", "'zz'", "'5'"}},
	{"vl", "VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin", clsStr, []string{"''", "'abc'", "'Müller'", "'MÜLLER'", "'€uro'", "'x…'", "'5'"}},
	// latin1_swedish_ci sorts Å Ä Ö Ü after Z (docs/operations.md); its
	// values here are the letters it folds as general_ci does
	{"vls", "VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci", clsStr, []string{"''", "'abc'", "'ABC '", "'Éclair'", "'éclair'", "'7'"}},
	{"tx", "TEXT COLLATE utf8mb4_general_ci", clsStr, []string{"''", "'hello world'", "'HELLO'", "'multi\\nline'", "'tab\\there'", "'100'"}},
	{"e", "ENUM('a','b','c')", clsStr, []string{"'a'", "'b'", "'c'"}},
	{"st", "SET('x','y','z')", clsStr, []string{"''", "'x'", "'x,z'", "'x,y,z'", "'y'"}},
	{"bn", "BINARY(4)", clsBin, []string{"''", "'ab'", "'abcd'", "x'00'", "'A'"}},
	{"vbn", "VARBINARY(10)", clsBin, []string{"''", "'abc'", "'ABC'", "'abc '", "x'ff00'"}},
	{"bl", "BLOB", clsBin, []string{"''", "'abc'", "'Abc'", "'12'"}},
	{"d", "DATE", clsDate, []string{"'2020-01-02'", "'1999-12-31'", "'2038-01-19'", "'1000-01-01'", "'9999-12-31'", "'2020-02-29'", "'1970-01-01'"}},
	{"dt", "DATETIME", clsDT, []string{"'2020-01-02 03:04:05'", "'1999-12-31 23:59:59'", "'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'", "'2020-01-02 00:00:00'", "'1970-01-01 00:00:01'"}},
	{"dt3", "DATETIME(3)", clsDT, []string{"'2020-01-02 03:04:05.123'", "'2020-01-02 03:04:05.000'", "'1999-12-31 23:59:59.999'", "'2038-01-19 03:14:07.500'"}},
	{"ts", "TIMESTAMP(6) NULL", clsDT, []string{"'2020-01-02 03:04:05.000001'", "'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'", "'2001-09-09 01:46:40.5'"}},
	{"tm", "TIME", clsTime, []string{"'10:20:30'", "'-01:00:00'", "'838:59:59'", "'00:00:00'", "'23:59:59'", "'-838:59:59'"}},
	{"tm2", "TIME(2)", clsTime, []string{"'10:20:30.25'", "'00:00:00.5'", "'-00:00:01.01'", "'100:00:00'"}},
	{"j", "JSON", clsJSON, []string{`'{"a": 1, "s": "x", "n": null, "arr": [1, "two", 3.5]}'`, `'{"a": "1", "s": "X", "o": {"k": true}}'`, `'[1, 2, 3]'`, `'"str"'`, `'12'`, `'{"a": 2.50, "s": ""}'`}},
}

// literals by class, for the generator.
var diffLiterals = map[string][]string{
	clsInt:  {"0", "1", "-1", "2", "7", "127", "-128", "255", "32767", "65535", "2147483647", "4294967295", "9223372036854775807", "-9223372036854775808", "18446744073709551615", "2020", "20200102", "100"},
	clsDec:  {"0.5", "-1.25", "12.50", "12.5", "0.0001", "3.14159", "99999999.99", "0.33", "7.0"},
	clsFlt:  {"1e3", "2.5e0", "-1.5e-3", "0e0", "1.5e0", "7e0"},
	clsStr:  {"''", "'a'", "'A'", "'abc'", "'ABC '", "' abc'", "'é'", "'E'", "'10'", "'1e2'", "'  7x'", "'x'", "'x,z'", "'b'", "'hello world'", "'Abc'", "'unicode'", "'ÀBC'", "'12abc'"},
	clsBin:  {"x'616263'", "x'00'", "x'41'"},
	clsDate: {"'2020-01-02'", "'1999-12-31'", "'2038-01-19'", "'2020-02-29'", "'1970-01-01'", "'2020-1-2'"},
	clsDT:   {"'2020-01-02 03:04:05'", "'2020-01-02 03:04:05.123'", "'1970-01-01 00:00:01'", "'1999-12-31 23:59:59'", "'2020-01-02'"},
	clsTime: {"'10:20:30'", "'-01:00:00'", "'838:59:59'", "'00:00:00.5'", "'23:59:59'", "'10:20:30.25'"},
}

var jsonPaths = []string{"'$.a'", "'$.s'", "'$.n'", "'$.arr[1]'", "'$.arr[0]'", "'$.o.k'", "'$[0]'", "'$'", "'$.missing'"}

// gen is a pair of texts: the filter's and the server's (MariaDB has no
// -> / ->> operators, so they are written as JSON_EXTRACT there).
type gen struct{ f, s string }

func same(s string) gen { return gen{s, s} }

func (g gen) wrap(pre, post string) gen { return gen{pre + g.f + post, pre + g.s + post} }

func join(sep string, gs ...gen) gen {
	fs, ss := make([]string, len(gs)), make([]string, len(gs))
	for i, g := range gs {
		fs[i], ss[i] = g.f, g.s
	}
	return gen{strings.Join(fs, sep), strings.Join(ss, sep)}
}

func call(name string, args ...gen) gen { return join(", ", args...).wrap(name+"(", ")") }

type generator struct {
	r    *rand.Rand
	cols map[string][]string // class -> column names
}

func (g *generator) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

var diffClasses = []string{clsInt, clsInt, clsDec, clsFlt, clsStr, clsStr, clsBin, clsDate, clsDT, clsTime, clsJSON}

func (g *generator) class() string { return diffClasses[g.r.IntN(len(diffClasses))] }

// leaf is a column or a literal of the class.
func (g *generator) leaf(cls string) gen {
	if cls == clsJSON {
		return same(g.pick(g.cols[clsJSON]))
	}
	switch n := g.r.IntN(20); {
	case n == 0:
		return same("NULL")
	case n < 11 && len(g.cols[cls]) > 0:
		return same(g.pick(g.cols[cls]))
	}
	return same(g.pick(diffLiterals[cls]))
}

// value generates a value expression of roughly the class.
func (g *generator) value(cls string, depth int) gen {
	if depth <= 0 || g.r.IntN(3) == 0 {
		return g.leaf(cls)
	}
	d := depth - 1
	switch cls {
	case clsInt:
		switch g.r.IntN(16) {
		case 0:
			return join(" "+g.pick([]string{"+", "-", "*", "DIV", "%"})+" ", g.value(clsInt, d), g.value(g.pick([]string{clsInt, clsInt, clsDec}), d)).wrap("(", ")")
		case 1:
			return call(g.pick([]string{"ABS", "SIGN"}), g.value(clsInt, d))
		case 2:
			return call(g.pick([]string{"LENGTH", "CHAR_LENGTH"}), g.value(g.pick([]string{clsStr, clsBin}), d))
		case 3:
			return call("LOCATE", g.value(clsStr, d), g.value(clsStr, d))
		case 4:
			return call("INSTR", g.value(clsStr, d), g.leaf(clsStr))
		case 5:
			return call(g.pick([]string{"YEAR", "MONTH", "DAY", "DAYOFMONTH"}), g.value(g.pick([]string{clsDate, clsDT}), d))
		case 6:
			return call(g.pick([]string{"HOUR", "MINUTE"}), g.value(g.pick([]string{clsDT, clsTime}), d))
		case 7:
			return call("DATEDIFF", g.value(g.pick([]string{clsDate, clsDT}), d), g.value(g.pick([]string{clsDate, clsDT}), d))
		case 8:
			unit := g.pick([]string{"SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "MICROSECOND"})
			return call("TIMESTAMPDIFF", same(unit), g.value(g.pick([]string{clsDate, clsDT}), d), g.value(g.pick([]string{clsDate, clsDT}), d))
		case 9:
			return call(g.pick([]string{"FLOOR", "CEIL", "CEILING", "ROUND"}), g.value(clsDec, d))
		case 10:
			return call("MOD", g.value(clsInt, d), g.value(clsInt, d))
		case 11:
			return call("UNIX_TIMESTAMP", same(g.pick([]string{"d", "dt", "dt3", "ts"})))
		case 12:
			return call("ROUND", g.value(clsInt, d), same(g.pick([]string{"-1", "-2", "0", "1"})))
		case 13:
			return call("IF", g.boolean(d), g.value(clsInt, d), g.value(clsInt, d))
		case 14:
			return call(g.pick([]string{"IFNULL", "COALESCE", "NULLIF"}), g.value(clsInt, d), g.value(clsInt, d))
		default:
			return join(" ", same("CASE"), g.value(clsInt, d), same("WHEN"), g.leaf(clsInt), same("THEN"), g.value(clsInt, d), same("ELSE"), g.value(clsInt, d), same("END")).wrap("(", ")")
		}
	case clsDec:
		switch g.r.IntN(5) {
		case 0:
			return join(" / ", g.value(g.pick([]string{clsInt, clsDec}), d), g.value(g.pick([]string{clsInt, clsDec}), d)).wrap("(", ")")
		case 1:
			return join(" "+g.pick([]string{"+", "-", "*", "%"})+" ", g.value(clsDec, d), g.value(g.pick([]string{clsInt, clsDec}), d)).wrap("(", ")")
		case 2:
			return call("ROUND", g.value(clsDec, d), same(g.pick([]string{"0", "1", "2", "-1"})))
		case 3:
			return call("ABS", g.value(clsDec, d))
		default:
			return call(g.pick([]string{"IFNULL", "COALESCE"}), g.value(clsDec, d), g.value(clsDec, d))
		}
	case clsFlt:
		switch g.r.IntN(3) {
		case 0:
			return join(" "+g.pick([]string{"+", "-", "*", "/"})+" ", g.value(clsFlt, d), g.value(g.pick([]string{clsInt, clsFlt, clsDec}), d)).wrap("(", ")")
		case 1:
			return call(g.pick([]string{"ROUND", "FLOOR", "CEIL", "ABS"}), g.value(clsFlt, d))
		default:
			return call("SIGN", g.value(clsFlt, d))
		}
	case clsStr, clsBin:
		switch g.r.IntN(12) {
		case 0:
			return call("CONCAT", g.value(cls, d), g.value(g.pick([]string{clsStr, clsInt, clsFlt, clsDec, clsDT, clsDate, clsTime}), d))
		case 1:
			return call("CONCAT_WS", same(g.pick([]string{"'-'", "','"})), g.value(cls, d), g.value(clsStr, d), g.leaf(clsStr))
		case 2:
			if g.r.IntN(2) == 0 {
				return call(g.pick([]string{"SUBSTRING", "SUBSTR"}), g.value(cls, d), same(g.pick([]string{"1", "2", "-2", "0", "5"})))
			}
			return call("SUBSTRING", g.value(cls, d), same(g.pick([]string{"1", "2", "-3"})), same(g.pick([]string{"1", "2", "0", "10"})))
		case 3:
			return call(g.pick([]string{"LEFT", "RIGHT"}), g.value(cls, d), same(g.pick([]string{"0", "1", "2", "3", "20"})))
		case 4:
			return call(g.pick([]string{"LOWER", "UPPER"}), g.value(cls, d))
		case 5:
			switch g.r.IntN(4) {
			case 0:
				return call("TRIM", g.value(cls, d))
			case 1:
				return g.value(cls, d).wrap("TRIM("+g.pick([]string{"LEADING", "TRAILING", "BOTH"})+" 'a' FROM ", ")")
			case 2:
				return g.value(cls, d).wrap("TRIM(LEADING FROM ", ")")
			}
			return g.value(cls, d).wrap("TRIM('x' FROM ", ")")
		case 6:
			return call("REPLACE", g.value(cls, d), same(g.pick([]string{"'a'", "'b'", "'ab'", "' '"})), same(g.pick([]string{"'Z'", "''", "'xx'"})))
		case 7:
			col := g.pick(g.cols[clsJSON])
			path := g.pick(jsonPaths)
			if g.r.IntN(2) == 0 {
				return gen{col + "->>" + path, "JSON_UNQUOTE(JSON_EXTRACT(" + col + ", " + path + "))"}
			}
			return call("JSON_UNQUOTE", call("JSON_EXTRACT", same(col), same(path)))
		case 8:
			return call("IF", g.boolean(d), g.value(cls, d), g.value(cls, d))
		case 9:
			return call(g.pick([]string{"IFNULL", "COALESCE"}), g.value(cls, d), g.value(cls, d))
		case 10:
			return call("NULLIF", g.value(cls, d), g.leaf(cls))
		default:
			return join(" ", same("CASE WHEN"), g.boolean(d), same("THEN"), g.value(cls, d), same("ELSE"), g.value(cls, d), same("END")).wrap("(", ")")
		}
	case clsDate:
		return call("DATE", g.value(g.pick([]string{clsDT, clsDate}), d))
	case clsDT:
		if g.r.IntN(4) == 0 {
			// not NOW(3): MariaDB reads the clock once per statement, the
			// filter once per NOW(), and NOW(3) = NOW() shows the difference
			return same(g.pick([]string{"NOW()", "CURRENT_TIMESTAMP"}))
		}
		return call(g.pick([]string{"IFNULL", "COALESCE"}), g.value(clsDT, d), g.leaf(clsDT))
	case clsTime:
		return call("IFNULL", g.value(clsTime, d), g.leaf(clsTime))
	case clsJSON:
		col := g.pick(g.cols[clsJSON])
		path := g.pick(jsonPaths)
		if g.r.IntN(2) == 0 {
			return gen{col + "->" + path, "JSON_EXTRACT(" + col + ", " + path + ")"}
		}
		return call("JSON_EXTRACT", same(col), same(path))
	}
	return g.leaf(cls)
}

var cmpOps = []string{"=", "<=>", "<>", "!=", "<", "<=", ">", ">="}

// compatible picks the class of the other side of a comparison: mostly
// the same, sometimes any.
func (g *generator) compatible(cls string) string {
	if g.r.IntN(4) == 0 {
		return g.class()
	}
	if cls == clsJSON {
		return g.pick([]string{clsInt, clsStr, clsDec})
	}
	return cls
}

func (g *generator) boolean(depth int) gen {
	d := depth - 1
	if depth <= 0 {
		cls := g.class()
		return join(" "+g.pick(cmpOps)+" ", g.leaf(cls), g.leaf(g.compatible(cls)))
	}
	switch g.r.IntN(14) {
	case 0, 1, 2, 3:
		cls := g.class()
		return join(" "+g.pick(cmpOps)+" ", g.value(cls, d), g.value(g.compatible(cls), d)).wrap("(", ")")
	case 4:
		return g.value(g.class(), d).wrap("(", ") IS "+g.pick([]string{"", "NOT "})+"NULL")
	case 5:
		return g.boolean(d).wrap("(", ") IS "+g.pick([]string{"", "NOT "})+g.pick([]string{"TRUE", "FALSE"}))
	case 6:
		cls := g.class()
		if cls == clsJSON {
			cls = clsInt
		}
		n := 1 + g.r.IntN(4)
		items := make([]gen, n)
		for i := range items {
			items[i] = g.leaf(g.compatible(cls))
		}
		v, list := g.value(cls, d), join(", ", items...)
		not := g.pick([]string{"", "NOT "})
		return gen{v.f + " " + not + "IN (" + list.f + ")", v.s + " " + not + "IN (" + list.s + ")"}.wrap("(", ")")
	case 7:
		cls := g.class()
		if cls == clsJSON {
			cls = clsDec
		}
		lo, hi := g.leaf(cls), g.leaf(cls)
		not := g.pick([]string{"", "NOT "})
		v := g.value(cls, d)
		return join(" ", v, same(not+"BETWEEN"), lo, same("AND"), hi).wrap("(", ")")
	case 8:
		pat := g.pick([]string{"'a%'", "'%c'", "'_b%'", "'%'", "''", "'A_C'", "'%é%'", "'x\\%y'", "'%1%'", "'abc'", "'ABC%'", "'a%b%c'"})
		v := g.value(g.pick([]string{clsStr, clsStr, clsBin, clsInt}), d)
		esc := ""
		if g.r.IntN(6) == 0 {
			pat, esc = "'x|%y'", " ESCAPE '|'"
		}
		return join(" ", v, same(g.pick([]string{"", "NOT "})+"LIKE"), same(pat+esc)).wrap("(", ")")
	case 9:
		pat := g.pick([]string{"'^a'", "'c$'", "'b+'", "'^[0-9]+$'", "'abc'", "'^.{3}$'", "'x|y'", "'É'"})
		op := g.pick([]string{"REGEXP", "RLIKE", "NOT REGEXP"})
		return join(" ", g.value(g.pick([]string{clsStr, clsStr, clsBin}), d), same(op), same(pat)).wrap("(", ")")
	case 10:
		return join(" "+g.pick([]string{"AND", "OR", "XOR"})+" ", g.boolean(d), g.boolean(d)).wrap("(", ")")
	case 11:
		return g.boolean(d).wrap("NOT (", ")")
	case 12:
		return g.value(g.pick([]string{clsInt, clsDec, clsStr}), d).wrap("(", ")")
	}
	cls := g.class()
	return join(" "+g.pick(cmpOps)+" ", g.leaf(cls), g.value(g.compatible(cls), d)).wrap("(", ")")
}

// diffEnv is the server, its table and the rows as the decoder gives them.
type diffEnv struct {
	db    *sql.DB
	table *sqlschema.Table
	ids   []int64
	rows  map[int64][]any
}

func startDiff(t *testing.T, nrows int, seed uint64) *diffEnv {
	t.Helper()
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "exprdiff", Binlog: true, FastCommit: true})
	db := src.DB(t)
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	mustExec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec("SET time_zone = '+00:00'")
	mustExec("CREATE DATABASE dx CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
	defs := []string{"id INT PRIMARY KEY"}
	for _, c := range diffColumns {
		defs = append(defs, c.name+" "+c.ddl)
	}
	mustExec("CREATE TABLE dx.t (" + strings.Join(defs, ", ") + ")")
	file, pos, _ := src.MasterStatus(t)

	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for id := 1; id <= nrows; id++ {
		vals := []string{strconv.Itoa(id)}
		for ci, c := range diffColumns {
			var v string
			switch {
			case id == 1:
				v = "NULL"
			case id == 2:
				v = c.values[0]
			case id <= 2+len(c.values):
				v = c.values[(id-2+ci)%len(c.values)]
			case r.IntN(8) == 0:
				v = "NULL"
			default:
				v = c.values[r.IntN(len(c.values))]
			}
			vals = append(vals, v)
		}
		mustExec("INSERT INTO dx.t VALUES (" + strings.Join(vals, ", ") + ")")
	}
	table, err := sqlschema.ReadTable(ctx, db, "dx", "t")
	if err != nil {
		t.Fatal(err)
	}
	env := &diffEnv{db: db, table: table, rows: map[int64][]any{}}

	binlogRows(ctx, t, src, 1<<30+91, file, pos, "t", nrows, func(row []any) {
		id := int64(row[0].(int32))
		env.rows[id] = row
		env.ids = append(env.ids, id)
	})
	return env
}

// binlogRows reads the rows events of table from file:pos of src, decoded
// as the worker's readers decode them, and hands each row image to fn
// until n rows have passed.
func binlogRows(ctx context.Context, t *testing.T, src *mariadbtest.Instance, serverID uint32, file string, pos uint32, table string, n int, fn func(row []any)) {
	t.Helper()
	syncer := src.BinlogSyncer(serverID)
	defer syncer.Close()
	streamer, err := syncer.StartSync(gomysql.Position{Name: file, Pos: pos})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for seen := 0; seen < n; {
		ev, err := streamer.GetEvent(rctx)
		if err != nil {
			t.Fatalf("binlog after %d of %d rows: %v", seen, n, err)
		}
		e, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(e.Table.Table) != table {
			continue
		}
		for _, row := range e.Rows {
			seen++
			fn(row)
		}
	}
}

// serverResults evaluates the expression on every row: 1/0 per id, or the
// error of the rows where MariaDB fails.
func (env *diffEnv) serverResults(ctx context.Context, expr string) (map[int64]string, error) {
	out := map[int64]string{}
	rows, err := env.db.QueryContext(ctx, "SELECT id, ("+expr+") IS TRUE FROM dx.t ORDER BY id")
	if err == nil {
		for rows.Next() {
			var id, v int64
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = strconv.FormatInt(v, 10)
		}
		err = rows.Err()
		rows.Close()
		if err == nil {
			return out, nil
		}
	}
	if !strings.Contains(err.Error(), "out of range") {
		return nil, err
	}
	// some row fails: find which, one by one
	for _, id := range env.ids {
		var v int64
		err := env.db.QueryRowContext(ctx, "SELECT ("+expr+") IS TRUE FROM dx.t WHERE id = ?", id).Scan(&v)
		switch {
		case err == nil:
			out[id] = strconv.FormatInt(v, 10)
		case strings.Contains(err.Error(), "out of range"):
			out[id] = "error (" + err.Error() + ")"
		default:
			return nil, err
		}
	}
	return out, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestDifferentialMariaDB(t *testing.T) {
	n := envInt("EXPR_DIFF_N", 400)
	seed := uint64(envInt("EXPR_DIFF_SEED", 1))
	const nrows = 48
	env := startDiff(t, nrows, seed)
	ctx := context.Background()

	g := &generator{r: rand.New(rand.NewPCG(seed, 0xd1ff)), cols: map[string][]string{}}
	for _, c := range diffColumns {
		g.cols[c.class] = append(g.cols[c.class], c.name)
	}
	g.cols[clsInt] = append(g.cols[clsInt], "id")

	pairs, refused, constant, mismatches := 0, 0, 0, 0
	check := func(opts Options) {
		x := g.boolean(1 + g.r.IntN(3))
		e, err := CompileWith(x.f, env.table, opts)
		if err != nil {
			// the filter refuses it: acceptable only for the documented
			// refusals (collation mixes, TIME against a number)
			if !documentedRefusal(err) {
				t.Errorf("Compile(%q): %v", x.f, err)
			}
			refused++
			return
		}
		if e.root.cnst {
			// no column: MariaDB folds constants at prepare time by other
			// paths (and a filter without a column is not one)
			constant++
			return
		}
		want, err := env.serverResults(ctx, x.s)
		if err != nil {
			if strings.Contains(err.Error(), "Illegal mix of collations") {
				refused++
				return
			}
			t.Errorf("MariaDB on %q: %v", x.s, err)
			return
		}
		for _, id := range env.ids {
			got, err := e.Eval(env.rows[id])
			res := "0"
			switch {
			case err != nil && strings.Contains(err.Error(), "out of range"):
				res = "error"
			case err != nil:
				res = "error: " + err.Error()
			case got:
				res = "1"
			}
			pairs++
			if res != strings.SplitN(want[id], " (", 2)[0] {
				mismatches++
				if mismatches <= 30 {
					zone := "UTC"
					if opts.Location != nil {
						zone = opts.Location.String()
					}
					t.Errorf("%s (session time zone %s)\n  row id %d %s\n  MariaDB %s, filter %s", x.s, zone, id, describeRow(env.table, env.rows[id], x.f), want[id], res)
				}
			}
		}
	}
	for range n {
		check(Options{})
	}
	// a quarter more in a session time zone other than UTC: TIMESTAMP
	// columns (UTC in the binlog), NOW() and UNIX_TIMESTAMP in it
	if _, err := env.db.ExecContext(ctx, "SET time_zone = '+05:30'"); err != nil {
		t.Fatal(err)
	}
	zoned := Options{Location: time.FixedZone("+05:30", 5*3600+1800)}
	for range n / 4 {
		check(zoned)
	}
	t.Logf("differential test (seed %d): %d expressions (%d of them in time zone +05:30), %d expression x row pairs, %d refused, %d constant (skipped), %d mismatches",
		seed, n+n/4, n/4, pairs, refused, constant, mismatches)
}

// documentedRefusal: Compile refuses the constructs docs/operations.md
// lists as refused.
func documentedRefusal(err error) bool {
	for _, s := range []string{"illegal mix of collations", "comparing a TIME value with a number"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// describeRow shows the values of the columns an expression names.
func describeRow(t *sqlschema.Table, row []any, expr string) string {
	var parts []string
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(expr, func(r rune) bool { return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) {
		words[w] = true
	}
	for i, c := range t.Columns {
		if words[c.Name] {
			v := row[i]
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			parts = append(parts, fmt.Sprintf("%s=%T(%q)", c.Name, row[i], fmt.Sprint(v)))
		}
	}
	return strings.Join(parts, " ")
}
