package exprfilter

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// arity is how many arguments a function takes: min, max (-1: any).
type arity struct{ min, max int }

// functions are the supported functions by lower-case name (the parser's
// spelling: `->` is json_extract, `->>` json_unquote(json_extract)).
var functions = map[string]arity{
	"if": {3, 3}, "ifnull": {2, 2}, "coalesce": {1, -1}, "nullif": {2, 2},
	"length": {1, 1}, "char_length": {1, 1}, "character_length": {1, 1},
	"concat": {1, -1}, "concat_ws": {2, -1},
	"substring": {2, 3}, "substr": {2, 3}, "left": {2, 2}, "right": {2, 2},
	"lower": {1, 1}, "upper": {1, 1}, "trim": {1, 3},
	"locate": {2, 3}, "instr": {2, 2}, "replace": {3, 3},
	"abs": {1, 1}, "round": {1, 2}, "floor": {1, 1}, "ceil": {1, 1}, "ceiling": {1, 1},
	"mod": {2, 2}, "sign": {1, 1},
	"now": {0, 1}, "current_timestamp": {0, 1},
	"year": {1, 1}, "month": {1, 1}, "day": {1, 1}, "dayofmonth": {1, 1},
	"hour": {1, 1}, "minute": {1, 1}, "date": {1, 1},
	"datediff": {2, 2}, "timestampdiff": {3, 3}, "unix_timestamp": {1, 1},
	"json_extract": {2, -1}, "json_unquote": {1, 1},
}

// timestampdiffUnits are the units TIMESTAMPDIFF takes.
var timestampdiffUnits = map[ast.TimeUnitType]bool{
	ast.TimeUnitMicrosecond: true, ast.TimeUnitSecond: true, ast.TimeUnitMinute: true, ast.TimeUnitHour: true,
	ast.TimeUnitDay: true, ast.TimeUnitWeek: true, ast.TimeUnitMonth: true, ast.TimeUnitQuarter: true, ast.TimeUnitYear: true,
}

var binaryOps = map[opcode.Op]bool{
	opcode.LogicAnd: true, opcode.LogicOr: true, opcode.LogicXor: true,
	opcode.EQ: true, opcode.NE: true, opcode.LT: true, opcode.LE: true, opcode.GT: true, opcode.GE: true, opcode.NullEQ: true,
	opcode.Plus: true, opcode.Minus: true, opcode.Mul: true, opcode.Div: true, opcode.IntDiv: true, opcode.Mod: true,
}

// Supported lists the supported SQL, for error messages.
func Supported() string {
	names := make([]string, 0, len(functions))
	for n := range functions {
		names = append(names, strings.ToUpper(n))
	}
	sort.Strings(names)
	return "columns of the table, literals (numbers, strings, NULL, TRUE/FALSE, x'..'), " +
		"+ - * / DIV % MOD, = <=> <> != < <= > >=, AND OR NOT XOR, IS [NOT] NULL, IS [NOT] TRUE/FALSE, " +
		"[NOT] IN (list), [NOT] BETWEEN, [NOT] LIKE [ESCAPE], [NOT] REGEXP / RLIKE, CASE, `->`, `->>`, and the functions " +
		strings.Join(names, ", ")
}

func refuse(what string) error {
	return fmt.Errorf("%s is not supported in an expression filter; supported: %s", what, Supported())
}

// checkNode refuses every node outside the supported set.
func checkNode(n ast.ExprNode) error {
	switch x := n.(type) {
	case *driver.ValueExpr:
		switch x.Kind() {
		case driver.KindNull, driver.KindInt64, driver.KindUint64, driver.KindFloat64, driver.KindString,
			driver.KindBytes, driver.KindMysqlDecimal, driver.KindBinaryLiteral:
			return nil
		}
		return refuse(fmt.Sprintf("the literal %s", restore(n)))
	case *ast.ColumnNameExpr:
		if x.Name.Schema.O != "" || x.Name.Table.O != "" {
			return refuse(fmt.Sprintf("the qualified column name %s (name the column alone)", restore(n)))
		}
		return nil
	case *ast.ParenthesesExpr:
		return checkNode(x.Expr)
	case *ast.BinaryOperationExpr:
		if !binaryOps[x.Op] {
			return refuse(fmt.Sprintf("the operator %s", x.Op.String()))
		}
		return checkAll(x.L, x.R)
	case *ast.UnaryOperationExpr:
		switch x.Op {
		case opcode.Not, opcode.Not2, opcode.Minus, opcode.Plus:
			return checkNode(x.V)
		}
		return refuse(fmt.Sprintf("the operator %s", x.Op.String()))
	case *ast.IsNullExpr:
		return checkNode(x.Expr)
	case *ast.IsTruthExpr:
		return checkNode(x.Expr)
	case *ast.PatternInExpr:
		if x.Sel != nil {
			return refuse("IN (subquery)")
		}
		if err := checkNode(x.Expr); err != nil {
			return err
		}
		return checkAll(x.List...)
	case *ast.BetweenExpr:
		return checkAll(x.Expr, x.Left, x.Right)
	case *ast.PatternLikeOrIlikeExpr:
		if !x.IsLike {
			return refuse("ILIKE")
		}
		return checkAll(x.Expr, x.Pattern)
	case *ast.PatternRegexpExpr:
		lit, ok := x.Pattern.(*driver.ValueExpr)
		if !ok || (lit.Kind() != driver.KindString && lit.Kind() != driver.KindBytes) {
			return fmt.Errorf("REGEXP takes a constant string pattern, not %s", restore(x.Pattern))
		}
		if _, err := regexp.Compile(lit.GetString()); err != nil {
			return fmt.Errorf("REGEXP pattern %q: %v (the filter uses RE2 syntax: no backreferences or lookaround)", lit.GetString(), err)
		}
		return checkNode(x.Expr)
	case *ast.CaseExpr:
		if x.Value != nil {
			if err := checkNode(x.Value); err != nil {
				return err
			}
		}
		for _, w := range x.WhenClauses {
			if err := checkAll(w.Expr, w.Result); err != nil {
				return err
			}
		}
		if x.ElseClause != nil {
			return checkNode(x.ElseClause)
		}
		return nil
	case *ast.FuncCallExpr:
		return checkFunc(x)
	case *ast.FuncCastExpr:
		return refuse("CAST / CONVERT")
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		return refuse("a subquery")
	case *ast.AggregateFuncExpr:
		return refuse(fmt.Sprintf("the aggregate function %s", strings.ToUpper(x.F)))
	case *ast.WindowFuncExpr:
		return refuse(fmt.Sprintf("the window function %s", strings.ToUpper(x.Name)))
	case *ast.VariableExpr:
		return refuse(fmt.Sprintf("the variable %s", restore(n)))
	case *ast.DefaultExpr:
		return refuse("DEFAULT")
	case *ast.RowExpr:
		return refuse("a row constructor")
	case ast.ParamMarkerExpr:
		return refuse("a parameter marker")
	case *ast.SetCollationExpr:
		return refuse("COLLATE")
	}
	return refuse(fmt.Sprintf("the construct %s", restore(n)))
}

func checkAll(ns ...ast.ExprNode) error {
	for _, n := range ns {
		if err := checkNode(n); err != nil {
			return err
		}
	}
	return nil
}

func checkFunc(x *ast.FuncCallExpr) error {
	name := x.FnName.L
	ar, ok := functions[name]
	if !ok {
		return refuse(fmt.Sprintf("the function %s", strings.ToUpper(x.FnName.O)))
	}
	args := x.Args
	switch name {
	case "trim":
		// TRIM(s), TRIM(remstr FROM s) and TRIM(LEADING|TRAILING|BOTH [remstr] FROM s):
		// the parser gives [s], [s, remstr] or [s, remstr-or-nil, direction]
		if len(args) == 3 {
			if _, ok := args[2].(*ast.TrimDirectionExpr); !ok {
				return fmt.Errorf("TRIM: unexpected form %s", restore(x))
			}
			args = args[:2]
			if v, ok := args[1].(*driver.ValueExpr); ok && v.Kind() == driver.KindNull && isTrimPlaceholder(x) {
				args = args[:1]
			}
		}
	case "timestampdiff":
		if len(args) != 3 {
			break
		}
		u, ok := args[0].(*ast.TimeUnitExpr)
		if !ok || !timestampdiffUnits[u.Unit] {
			return fmt.Errorf("TIMESTAMPDIFF: the unit %s is not supported (MICROSECOND, SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER, YEAR)", restore(args[0]))
		}
		args = args[1:]
		ar = arity{2, 2}
	case "json_extract":
		for _, p := range args[1:] {
			lit, ok := p.(*driver.ValueExpr)
			if !ok || lit.Kind() != driver.KindString {
				return fmt.Errorf("JSON_EXTRACT takes constant string paths, not %s", restore(p))
			}
			if _, err := parseJSONPath(lit.GetString()); err != nil {
				return err
			}
		}
	case "now", "current_timestamp":
		if len(args) == 1 {
			v, ok := args[0].(*driver.ValueExpr)
			if !ok || (v.Kind() != driver.KindInt64 && v.Kind() != driver.KindUint64) || v.GetInt64() < 0 || v.GetInt64() > 6 {
				return fmt.Errorf("%s: the precision must be a number from 0 to 6", strings.ToUpper(name))
			}
			return nil
		}
	}
	if len(args) < ar.min || (ar.max >= 0 && len(args) > ar.max) {
		return fmt.Errorf("%s takes %s, not %d", strings.ToUpper(x.FnName.O), arityText(ar), len(args))
	}
	return checkAll(args...)
}

// isTrimPlaceholder reports whether TRIM's second argument is the NULL the
// parser puts in for "TRIM(LEADING FROM s)" (no remstr written), not a
// NULL literal the user wrote.
func isTrimPlaceholder(x *ast.FuncCallExpr) bool {
	v, ok := x.Args[1].(*driver.ValueExpr)
	if !ok {
		return false
	}
	return v.OriginTextPosition() == 0 && v.Text() == ""
}

func arityText(a arity) string {
	switch {
	case a.max == a.min && a.min == 1:
		return "1 argument"
	case a.max == a.min:
		return fmt.Sprintf("%d arguments", a.min)
	case a.max < 0:
		return fmt.Sprintf("at least %d arguments", a.min)
	}
	return fmt.Sprintf("%d to %d arguments", a.min, a.max)
}
