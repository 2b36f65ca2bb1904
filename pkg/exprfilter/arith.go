package exprfilter

import (
	"errors"
	"math"
	"math/bits"

	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/shopspring/decimal"
)

// numClass is the arithmetic class of a static type: a string (an ENUM or
// SET included) computes as DOUBLE, a temporal value as its number
// (YYYYMMDDhhmmss, DECIMAL with a fraction).
func numClass(t typ) (kind, int32) {
	switch t.k {
	case kInt, kUint:
		return t.k, 0
	case kDec:
		return kDec, t.scale
	case kFloat, kStr:
		return kFloat, 0
	case kTime, kDur:
		if t.fsp > 0 && !t.date {
			return kDec, int32(t.fsp)
		}
		return kInt, 0
	}
	return kInt, 0
}

// divPrecisionIncrement is MariaDB's div_precision_increment default.
const divPrecisionIncrement = 4

// maxScale is the largest DECIMAL scale MariaDB keeps.
const maxScale = 38

var (
	errUnsignedOutOfRange = errors.New("BIGINT UNSIGNED value is out of range")
	errDoubleOutOfRange   = errors.New("DOUBLE value is out of range")
)

func arith(op opcode.Op, l, r node) (node, error) {
	lk, ls := numClass(l.t)
	rk, rs := numClass(r.t)
	var out typ
	switch {
	case op == opcode.IntDiv:
		out = typ{k: kInt}
		if lk == kUint || rk == kUint || l.t.uns || r.t.uns {
			out.k = kUint
		}
	case lk == kFloat || rk == kFloat:
		out = typ{k: kFloat}
	case op == opcode.Div:
		out = typ{k: kDec, scale: min(ls+divPrecisionIncrement, maxScale)}
	case lk == kDec || rk == kDec:
		out = typ{k: kDec, scale: max(ls, rs)}
		if op == opcode.Mul {
			out.scale = min(ls+rs, maxScale)
		}
	default:
		out = typ{k: kInt}
		if lk == kUint || rk == kUint {
			out.k = kUint
		}
		if op == opcode.Mod {
			out.k = kInt
			if lk == kUint {
				out.k = kUint
			}
		}
	}
	if l.t.k == kNull && r.t.k == kNull {
		return constNode(nullVal, typ{k: out.k, scale: out.scale}), nil
	}
	lf, rf := l.f, r.f
	// a DIV of two integers is exact; with any other operand MariaDB
	// computes it through DECIMAL (a DOUBLE included)
	divClass := kInt
	if lk != kInt && lk != kUint || rk != kInt && rk != kUint {
		divClass = kDec
	}
	// MariaDB evaluates both operands of a DOUBLE or integer operation
	// before it looks at NULL (so NULL / (d * 1e300) still overflows), the
	// second of a DECIMAL one only when the first is not NULL
	lazy := out.k == kDec && op != opcode.IntDiv
	f := func(row []any) (val, error) {
		a, err := lf(row)
		if err != nil || (lazy && a.k == kNull) {
			return nullVal, err
		}
		b, err := rf(row)
		if err != nil || a.k == kNull || b.k == kNull {
			return nullVal, err
		}
		if op == opcode.IntDiv {
			return intDiv(a, b, divClass, out.k == kUint)
		}
		switch out.k {
		case kFloat:
			return floatOp(op, a.toFloat(), b.toFloat())
		case kDec:
			return decOp(op, a.toDec(), b.toDec())
		}
		return intOp(op, a, b, out.k == kUint)
	}
	return node{t: out, f: f}, nil
}

func floatOp(op opcode.Op, x, y float64) (val, error) {
	var z float64
	switch op {
	case opcode.Plus:
		z = x + y
	case opcode.Minus:
		z = x - y
	case opcode.Mul:
		z = x * y
	case opcode.Div:
		if y == 0 {
			return nullVal, nil
		}
		z = x / y
	case opcode.Mod:
		if y == 0 {
			return nullVal, nil
		}
		z = math.Mod(x, y)
	}
	if math.IsInf(z, 0) || math.IsNaN(z) {
		return nullVal, errDoubleOutOfRange
	}
	return floatVal(z), nil
}

// decDiv divides as MariaDB's do_div_mod does: each operand's fraction
// is padded to whole 9-digit words, the padding counts toward the
// increment (div_precision_increment for /, 0 for DIV), and the quotient
// has the words the padded fractions and the rest of the increment take,
// truncated there: 1/3 = 0.333333333, 5/dcw with dcw a DECIMAL(30,10)
// keeps 18 digits.
func decDiv(x, y decimal.Decimal, incr int32) decimal.Decimal {
	words := func(d int32) int32 { return (d + 8) / 9 }
	f1, f2 := fracDigits(x), fracDigits(y)
	p1, p2 := 9*words(f1), 9*words(f2)
	incr = max(0, incr-(p1-f1)-(p2-f2))
	prec := 9 * words(p1+p2+incr)
	q, _ := x.QuoRem(y, prec)
	return q
}

func fracDigits(d decimal.Decimal) int32 {
	if e := d.Exponent(); e < 0 {
		return -e
	}
	return 0
}

func decOp(op opcode.Op, x, y decimal.Decimal) (val, error) {
	switch op {
	case opcode.Plus:
		return decVal(x.Add(y)), nil
	case opcode.Minus:
		return decVal(x.Sub(y)), nil
	case opcode.Mul:
		return decVal(x.Mul(y)), nil
	case opcode.Div:
		if y.IsZero() {
			return nullVal, nil
		}
		q := decDiv(x, y, divPrecisionIncrement)
		v := decVal(q)
		// a quotient truncated to zero keeps the sign (MariaDB's "-0")
		v.negz = q.IsZero() && !x.IsZero() && x.Sign() != y.Sign()
		return v, nil
	case opcode.Mod:
		if y.IsZero() {
			return nullVal, nil
		}
		// the remainder has the sign of the dividend; MariaDB keeps that
		// sign on a zero remainder with a fraction, and that "-0"
		// compares below 0
		_, r := x.QuoRem(y, 0)
		v := decVal(r)
		v.negz = r.IsZero() && x.Sign() < 0 && max(fracDigits(x), fracDigits(y)) > 0
		return v, nil
	}
	return nullVal, nil
}

// i128 is an exact intermediate of a BIGINT operation.
type i128 struct {
	hi int64
	lo uint64
}

func toI128(v val) i128 {
	if v.k == kUint {
		return i128{0, uint64(v.i)}
	}
	n := v.i
	if v.k != kInt {
		var u bool
		n, u = v.toInt()
		if u {
			return i128{0, uint64(n)}
		}
	}
	if n < 0 {
		return i128{-1, uint64(n)}
	}
	return i128{0, uint64(n)}
}

func (a i128) neg() i128 {
	lo, borrow := bits.Sub64(0, a.lo, 0)
	return i128{-a.hi - int64(borrow), lo}
}

func (a i128) add(b i128) i128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	return i128{a.hi + b.hi + int64(c), lo}
}

// fit returns the result as a value of the wanted signedness, or the
// out-of-range error.
func (a i128) fit(unsigned bool) (val, error) {
	if unsigned {
		if a.hi != 0 {
			return nullVal, errUnsignedOutOfRange
		}
		return uintVal(a.lo), nil
	}
	if (a.hi == 0 && a.lo <= math.MaxInt64) || (a.hi == -1 && a.lo > math.MaxInt64) {
		return intVal(int64(a.lo)), nil
	}
	return nullVal, errOutOfRange
}

func mulI128(a, b i128) (i128, bool) {
	an, bn := a.hi < 0, b.hi < 0
	if an {
		a = a.neg()
	}
	if bn {
		b = b.neg()
	}
	// magnitudes fit in 64 bits (operands are BIGINTs)
	hi, lo := bits.Mul64(a.lo, b.lo)
	if hi >= 1<<63 {
		return i128{}, false
	}
	r := i128{int64(hi), lo}
	if an != bn {
		r = r.neg()
	}
	return r, true
}

func intOp(op opcode.Op, a, b val, unsigned bool) (val, error) {
	x, y := toI128(a), toI128(b)
	outOfRange := errOutOfRange
	if unsigned {
		outOfRange = errUnsignedOutOfRange
	}
	switch op {
	case opcode.Plus:
		return x.add(y).fit(unsigned)
	case opcode.Minus:
		return x.add(y.neg()).fit(unsigned)
	case opcode.Mul:
		p, ok := mulI128(x, y)
		if !ok {
			return nullVal, outOfRange
		}
		return p.fit(unsigned)
	case opcode.Mod:
		if y.lo == 0 && y.hi == 0 {
			return nullVal, nil
		}
		// magnitudes, sign of the dividend
		xn, yn := x.hi < 0, y.hi < 0
		if xn {
			x = x.neg()
		}
		if yn {
			y = y.neg()
		}
		m := x.lo % y.lo
		r := i128{0, m}
		if xn {
			r = r.neg()
		}
		return r.fit(unsigned && !xn)
	}
	return nullVal, nil
}

// intDiv is DIV: the quotient truncated toward zero, as an integer.
func intDiv(a, b val, class kind, unsigned bool) (val, error) {
	outOfRange := errOutOfRange
	if unsigned {
		outOfRange = errUnsignedOutOfRange
	}
	switch class {
	case kDec:
		y := b.toDec()
		if y.IsZero() {
			return nullVal, nil
		}
		q := decDiv(a.toDec(), y, 0).Truncate(0)
		if unsigned {
			if q.Sign() < 0 || q.GreaterThan(maxUint64Dec) {
				return nullVal, outOfRange
			}
			return uintVal(q.BigInt().Uint64()), nil
		}
		if q.GreaterThan(maxInt64Dec) || q.LessThan(minInt64Dec) {
			return nullVal, outOfRange
		}
		return intVal(q.IntPart()), nil
	}
	x, y := toI128(a), toI128(b)
	if y.lo == 0 && y.hi == 0 {
		return nullVal, nil
	}
	xn, yn := x.hi < 0, y.hi < 0
	if xn {
		x = x.neg()
	}
	if yn {
		y = y.neg()
	}
	q := i128{0, x.lo / y.lo}
	if xn != yn {
		q = q.neg()
	}
	if unsigned && q.hi < 0 && q.lo == 0 {
		q.hi = 0
	}
	return q.fit(unsigned)
}

var maxUint64Dec = decimal.RequireFromString("18446744073709551615")

// negNode is unary minus.
func negNode(v node) node {
	k, scale := numClass(v.t)
	if v.t.k == kNull {
		return v
	}
	f := v.f
	out := typ{k: k, scale: scale}
	if k == kUint {
		out.k = kInt
	}
	return node{t: out, f: func(row []any) (val, error) {
		a, err := f(row)
		if err != nil || a.k == kNull {
			return nullVal, err
		}
		switch k {
		case kFloat:
			return floatVal(-a.toFloat()), nil
		case kDec:
			return decVal(a.toDec().Neg()), nil
		}
		return toI128(a).neg().fit(false)
	}}
}
