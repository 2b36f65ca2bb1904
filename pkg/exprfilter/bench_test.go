package exprfilter

import (
	"testing"
)

// BenchmarkEval measures one Eval on a decoded row image (the form the
// binlog decoder delivers) per iteration: ns/op is ns/row, allocs/op
// allocations per row. `make bench` runs it.
func BenchmarkEval(b *testing.B) {
	tb := testTable(b)
	row := testRow()
	for _, c := range []struct{ name, expr string }{
		{"int-compare", "id > 5"},
		{"and-of-three", "id > 5 AND u <> 0 AND big < 0"},
		{"unsigned-in-list", "ubig IN (1, 2, 18446744073709551615)"},
		{"string-ci-equal", "s = 'hello'"},
		{"string-like", "s LIKE 'he%o'"},
		{"decimal-compare", "d > 12.49"},
		{"decimal-divide", "d / 3 > 4"},
		{"datetime-vs-now", "dt < NOW()"},
		{"datetime-vs-literal", "dt BETWEEN '2020-01-01' AND '2020-12-31'"},
		{"enum-set", "e = 'y' OR st = 'a,c'"},
		{"case-if", "CASE WHEN id > 5 THEN 1 ELSE 0 END = IF(s = 'x', 0, 1)"},
		{"concat", "CONCAT(s, '-', id) = 'Hello-7'"},
		{"json-extract", "j->>'$.s' = 'x'"},
		{"modulo-and-decimal", "id % 2 = 1 AND d > 1"},
	} {
		expr := c.expr
		e, err := Compile(expr, tb)
		if err != nil {
			b.Fatalf("%s: %v", expr, err)
		}
		if _, err := e.Eval(row); err != nil {
			b.Fatalf("%s: %v", expr, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Eval(row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
