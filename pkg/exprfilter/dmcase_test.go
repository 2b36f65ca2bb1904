package exprfilter

import (
	"context"
	"strings"
	"testing"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// DM's expression_filter integration case (dm/tests/expression_filter:
// the table of db1.prepare.sql, the rows of db1.increment.sql, the
// insert-value-exprs of conf/dm-task.yaml), evaluated on the rows read
// back through the binlog: a row is filtered exactly when DM's data marks
// it should_skip = 1.
var dmCaseExprs = []string{
	"c_null IS NOT NULL", "c_bit = b'1111'", "c_tinyint >= 25", "c_smallint >= 25", "c_mediumint >= 25",
	"c_int >= 25", "c_bigint >= 25", "c_decimal >= 25", "c_float >= 25", "c_double >= 25",
	"c_date = '2021-06-22'", "c_datetime = '2021-01-01 12:34:56.789'",
	"c_timestamp = '2021-01-01 12:34:56.5678+08:00'", "c_time = '-838:58:50.12345'", "c_year = '2021'",
	"c_char = '2234'", "c_varchar = '4234'", "c_binary = 'b'", "c_varbinary = 'd'", "c_tinyblob = 'b'",
	"c_tinytext = 'd'", "c_blob = 'asdf'", "c_text = 'asd'", "c_mediumblob = 'asdf'", "c_mediumtext = 'asdf'",
	"c_longblob = 'asdf'", "c_longtext = 'asdf'", "c_enum = 'b'", "c_set = 'b,c'", `c_json->"$.id" = 2`,
}

const dmCaseTable = `CREATE TABLE expr_filter.t1 (id int NOT NULL AUTO_INCREMENT, should_skip int, c_null int,
 c_bit bit(8), c_tinyint tinyint(5) unsigned, c_smallint smallint(6), c_mediumint mediumint(7), c_int int(8),
 c_bigint bigint(9) unsigned, c_decimal decimal(7,2), c_float float(10), c_double double, c_date date,
 c_datetime datetime(3), c_timestamp timestamp(4) NULL, c_time time(5), c_year year, c_char char(4),
 c_varchar national varchar(255), c_binary binary(1), c_varbinary varbinary(4), c_tinyblob tinyblob,
 c_tinytext tinytext, c_blob blob(20), c_text text(10), c_mediumblob mediumblob, c_mediumtext mediumtext,
 c_longblob longblob, c_longtext longtext, c_enum enum('a', 'b', 'c'), c_set set('a', 'b', 'c'), c_json json,
 PRIMARY KEY (id))`

var dmCaseRows = []string{
	"(should_skip, c_null) values (0, NULL), (1, 123)",
	"(should_skip, c_bit) values (0, b'1010'), (1, b'1111')",
	"(should_skip, c_tinyint) values (0, 5), (1, 25)",
	"(should_skip, c_smallint) values (0, 6), (1, 26)",
	"(should_skip, c_mediumint) values (0, 7), (1, 27)",
	"(should_skip, c_int) values (0, 8), (1, 28)",
	"(should_skip, c_bigint) values (0, 9), (1, 29)",
	"(should_skip, c_decimal) values (0, 10.01), (1, 30.02)",
	"(should_skip, c_float) values (0, 11.12), (1, 31.324)",
	"(should_skip, c_double) values (0, 12.32), (1, 32.4334)",
	"(should_skip, c_date) values (0, '1995-03-07'), (1, '2021-06-22')",
	"(should_skip, c_datetime) values (0, '1000-01-01 12:34:56.789'), (1, '2021-01-01 12:34:56.789')",
	"+08:00",
	"(should_skip, c_timestamp) values (0, '2020-01-01 12:34:56.1234'), (1, '2021-01-01 12:34:56.5678')",
	"(should_skip, c_time) values (0, '-838:59:50.12345'), (1, '-838:58:50.12345')",
	"(should_skip, c_year) values (0, 2020), (1, 2021)",
	"(should_skip, c_char) values (0, '1234'), (1, '2234')",
	"(should_skip, c_varchar) values (0, '3234'), (1, '4234')",
	"(should_skip, c_binary) values (0, 'a'), (1, 'b')",
	"(should_skip, c_varbinary) values (0, 'c'), (1, 'd')",
	"(should_skip, c_tinyblob) values (0, 'a'), (1, 'b')",
	"(should_skip, c_tinytext) values (0, 'c'), (1, 'd')",
	"(should_skip, c_blob) values (0, 'qwer'), (1, 'asdf')",
	"(should_skip, c_text) values (0, 'qwe'), (1, 'asd')",
	"(should_skip, c_mediumblob) values (0, 'qwer'), (1, 'asdf')",
	"(should_skip, c_mediumtext) values (0, 'qwer'), (1, 'asdf')",
	"(should_skip, c_longblob) values (0, 'qwer'), (1, 'asdf')",
	"(should_skip, c_longtext) values (0, 'qwer'), (1, 'asdf')",
	"(should_skip, c_enum) values (0, 'a'), (1, 'b')",
	"(should_skip, c_set) values (0, 'a'), (1, 'b,c')",
	`(should_skip, c_json) values (0, '{"id": 1}'), (1, '{"id": 2}')`,
}

func TestDMExpressionFilterCase(t *testing.T) {
	src := mariadbtest.Start(t, mariadbtest.Options{Name: "exprdm", Binlog: true, FastCommit: true})
	db := src.DB(t)
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("SET time_zone = '+00:00'")
	exec("CREATE DATABASE expr_filter")
	exec(dmCaseTable)
	file, pos, _ := src.MasterStatus(t)
	n := 0
	for _, r := range dmCaseRows {
		if r == "+08:00" {
			exec("SET time_zone = '+08:00'") // as db1.increment.sql does before the TIMESTAMP rows
			continue
		}
		exec("INSERT INTO expr_filter.t1 " + r)
		n += 2
	}
	table, err := sqlschema.ReadTable(ctx, db, "expr_filter", "t1")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []*Expr
	for _, s := range dmCaseExprs {
		if err := Check(s); err != nil {
			t.Fatalf("Check(%q): %v", s, err)
		}
		e, err := Compile(s, table)
		if err != nil {
			t.Fatalf("Compile(%q): %v", s, err)
		}
		exprs = append(exprs, e)
	}

	skipped := 0
	binlogRows(ctx, t, src, 1<<30+92, file, pos, "t1", n, func(row []any) {
		want := row[1].(int32) == 1
		var matched []string
		for _, x := range exprs {
			ok, err := x.Eval(row)
			if err != nil {
				t.Errorf("row %v: %s: %v", row[0], x, err)
			}
			if ok {
				matched = append(matched, x.String())
			}
		}
		if got := len(matched) > 0; got != want {
			t.Errorf("row id %v (should_skip %v): filtered %v by [%s]", row[0], want, got, strings.Join(matched, "; "))
		}
		if len(matched) > 0 {
			skipped++
		}
	})
	if skipped != n/2 {
		t.Errorf("%d of %d rows filtered, want %d", skipped, n, n/2)
	}
}
