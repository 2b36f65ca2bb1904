package exprfilter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/shopspring/decimal"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Coercibility of a string (MariaDB's DERIVATION_*): a column's collation
// wins over a literal's.
const (
	coerImplicit  = 2 // a column, or a function of one
	coerCoercible = 4 // a literal
	coerNumeric   = 5 // a number or temporal value as text
	coerNone      = 6 // NULL
)

// typ is a node's static type, which decides how its parents compare and
// compute (MariaDB resolves these when it prepares the statement).
type typ struct {
	k     kind
	coll  *collation
	coer  int
	scale int32 // kDec: decimals; kFloat: unused
	date  bool  // kTime: DATE
	fsp   int8  // kTime/kDur: fractional-second digits
	enum  bool  // kStr: an ENUM/SET column (also a number)
	year  bool  // kUint: a YEAR column (constants compared with it are read as years)
	cnst  bool  // the value reads no column and no clock (set by compile)
	uns   bool  // kDec: an UNSIGNED DECIMAL column (a DIV with it is unsigned)
	bit   bool  // kUint: a BIT column, a byte string in string functions
	json  bool  // kStr: JSON text (a JSON column or JSON_EXTRACT)
}

// evalFn computes a node's value on one row.
type evalFn func(row []any) (val, error)

type node struct {
	t typ
	f evalFn
	// cnst: the node reads no column and no clock, so its value is known
	// when the expression is compiled
	cnst bool
}

// nowFn reads the session clock.
type nowFn = func() time.Time

type compiler struct {
	table *sqlschema.Table
	loc   *time.Location
	now   func() time.Time
	src   string // the statement parsed, for the literals' original text
}

func (c *compiler) nowFn() nowFn { return c.now }

func restore(n ast.Node) string {
	var b strings.Builder
	if err := n.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return fmt.Sprintf("%T", n)
	}
	return b.String()
}

func constNode(v val, t typ) node {
	return node{t: t, f: func([]any) (val, error) { return v, nil }}
}

func (c *compiler) compile(n ast.ExprNode) (node, error) {
	out, err := c.compileNode(n)
	if err == nil {
		out.cnst = isConstant(n)
		out.t.cnst = out.cnst
	}
	return out, err
}

// constVisitor finds a column or a clock function in an expression.
type constVisitor struct{ varies bool }

func (v *constVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ColumnNameExpr:
		v.varies = true
		return n, true
	case *ast.FuncCallExpr:
		if x.FnName.L == "now" || x.FnName.L == "current_timestamp" {
			v.varies = true
			return n, true
		}
	}
	return n, false
}

func (v *constVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func isConstant(n ast.ExprNode) bool {
	var v constVisitor
	n.Accept(&v)
	return !v.varies
}

func (c *compiler) compileNode(n ast.ExprNode) (node, error) {
	switch x := n.(type) {
	case *driver.ValueExpr:
		return c.literal(x)
	case *ast.ColumnNameExpr:
		return c.column(x.Name.Name.O)
	case *ast.ParenthesesExpr:
		return c.compile(x.Expr)
	case *ast.BinaryOperationExpr:
		l, err := c.compile(x.L)
		if err != nil {
			return node{}, err
		}
		r, err := c.compile(x.R)
		if err != nil {
			return node{}, err
		}
		return c.binary(x.Op, l, r)
	case *ast.UnaryOperationExpr:
		v, err := c.compile(x.V)
		if err != nil {
			return node{}, err
		}
		switch x.Op {
		case opcode.Not, opcode.Not2:
			return notNode(v), nil
		case opcode.Minus:
			return negNode(v), nil
		case opcode.Plus:
			return v, nil
		}
	case *ast.IsNullExpr:
		v, err := c.compile(x.Expr)
		if err != nil {
			return node{}, err
		}
		not := x.Not
		f := v.f
		return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
			a, err := f(row)
			if err != nil {
				return a, err
			}
			return boolVal(a.isNull() != not), nil
		}}, nil
	case *ast.IsTruthExpr:
		v, err := c.compile(x.Expr)
		if err != nil {
			return node{}, err
		}
		want, not := x.True != 0, x.Not
		f := v.f
		return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
			a, err := f(row)
			if err != nil {
				return a, err
			}
			t, known := a.truthy()
			return boolVal((known && t == want) != not), nil
		}}, nil
	case *ast.PatternInExpr:
		return c.in(x)
	case *ast.BetweenExpr:
		return c.between(x)
	case *ast.PatternLikeOrIlikeExpr:
		return c.like(x)
	case *ast.PatternRegexpExpr:
		return c.regexp(x)
	case *ast.CaseExpr:
		return c.caseExpr(x)
	case *ast.FuncCallExpr:
		return c.function(x)
	}
	return node{}, refuse(fmt.Sprintf("the construct %s", restore(n)))
}

// literal is a constant.
func (c *compiler) literal(x *driver.ValueExpr) (node, error) {
	switch x.Kind() {
	case driver.KindNull:
		return constNode(nullVal, typ{k: kNull, coer: coerNone}), nil
	case driver.KindInt64:
		return constNode(intVal(x.GetInt64()), typ{k: kInt}), nil
	case driver.KindUint64:
		return constNode(uintVal(x.GetUint64()), typ{k: kUint}), nil
	case driver.KindFloat64:
		return constNode(floatVal(x.GetFloat64()), typ{k: kFloat}), nil
	case driver.KindString:
		return constNode(strVal(x.GetString(), defaultColl), typ{k: kStr, coll: defaultColl, coer: coerCoercible}), nil
	case driver.KindBytes:
		return constNode(strVal(string(x.GetBytes()), binaryColl), typ{k: kStr, coll: binaryColl, coer: coerCoercible}), nil
	case driver.KindBinaryLiteral:
		b := x.GetBinaryLiteral()
		v := strVal(string(b), binaryColl)
		// b'1111' and 0x41 are numbers in a numeric context, x'41' is not
		// (MariaDB: b'101' = 5 and 0x41 = 65 are true, x'41' = 65 false)
		if pos := x.OriginTextPosition(); pos >= 0 && pos < len(c.src) && len(b) <= 8 {
			if t := strings.ToLower(c.src[pos:min(pos+2, len(c.src))]); t == "b'" || t == "0b" || t == "0x" {
				var n uint64
				for _, ch := range []byte(b) {
					n = n<<8 | uint64(ch)
				}
				v.hasNum, v.i = true, int64(n)
			}
		}
		return constNode(v, typ{k: kStr, coll: binaryColl, coer: coerCoercible}), nil
	case driver.KindMysqlDecimal:
		d, err := decimal.NewFromString(x.GetMysqlDecimal().String())
		if err != nil {
			return node{}, fmt.Errorf("the number %s: %v", x.GetMysqlDecimal().String(), err)
		}
		return constNode(decVal(d), typ{k: kDec, scale: -d.Exponent()}), nil
	}
	return node{}, refuse(fmt.Sprintf("the literal %s", restore(x)))
}

// errOutOfRange is MariaDB's ER_DATA_OUT_OF_RANGE for an integer result.
var errOutOfRange = errors.New("BIGINT value is out of range")

// isTrue evaluates a node as a condition: (truth, known).
func isTrue(f evalFn, row []any) (bool, bool, error) {
	v, err := f(row)
	if err != nil {
		return false, false, err
	}
	t, k := v.truthy()
	return t, k, nil
}

func notNode(v node) node {
	f := v.f
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		t, known, err := isTrue(f, row)
		if err != nil || !known {
			return nullVal, err
		}
		return boolVal(!t), nil
	}}
}

func (c *compiler) binary(op opcode.Op, l, r node) (node, error) {
	switch op {
	case opcode.LogicAnd:
		lf, rf := l.f, r.f
		return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
			lt, lk, err := isTrue(lf, row)
			if err != nil {
				return nullVal, err
			}
			if lk && !lt {
				return intVal(0), nil
			}
			rt, rk, err := isTrue(rf, row)
			if err != nil {
				return nullVal, err
			}
			if rk && !rt {
				return intVal(0), nil
			}
			if !lk || !rk {
				return nullVal, nil
			}
			return intVal(1), nil
		}}, nil
	case opcode.LogicOr:
		lf, rf := l.f, r.f
		return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
			lt, lk, err := isTrue(lf, row)
			if err != nil {
				return nullVal, err
			}
			if lk && lt {
				return intVal(1), nil
			}
			rt, rk, err := isTrue(rf, row)
			if err != nil {
				return nullVal, err
			}
			if rk && rt {
				return intVal(1), nil
			}
			if !lk || !rk {
				return nullVal, nil
			}
			return intVal(0), nil
		}}, nil
	case opcode.LogicXor:
		lf, rf := l.f, r.f
		return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
			lt, lk, err := isTrue(lf, row)
			if err != nil || !lk {
				return nullVal, err
			}
			rt, rk, err := isTrue(rf, row)
			if err != nil || !rk {
				return nullVal, err
			}
			return boolVal(lt != rt), nil
		}}, nil
	case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE, opcode.NullEQ:
		return c.comparison(op, l, r)
	case opcode.Plus, opcode.Minus, opcode.Mul, opcode.Div, opcode.IntDiv, opcode.Mod:
		return arith(op, l, r)
	}
	return node{}, refuse(fmt.Sprintf("the operator %s", op.String()))
}
