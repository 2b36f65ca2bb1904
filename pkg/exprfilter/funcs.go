package exprfilter

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/shopspring/decimal"
)

func (c *compiler) function(x *ast.FuncCallExpr) (node, error) {
	name := x.FnName.L
	switch name {
	case "trim":
		return c.trim(x)
	case "timestampdiff":
		return c.timestampdiff(x)
	case "now", "current_timestamp":
		fsp := int8(0)
		if len(x.Args) == 1 {
			fsp = int8(x.Args[0].(*driver.ValueExpr).GetInt64())
		}
		now := c.now
		return node{t: typ{k: kTime, fsp: fsp}, f: func([]any) (val, error) {
			t := now()
			v := fromGoTime(t, fsp)
			if fsp < 6 {
				p := int64(math.Pow10(int(6 - fsp)))
				us := v.i % 1e6
				v.i -= us % p
			}
			return v, nil
		}}, nil
	}
	args, err := c.compileAll(x.Args)
	if err != nil {
		return node{}, err
	}
	switch name {
	case "if":
		out := aggType(args[1].t, args[2].t)
		cf, af, bf := args[0].f, args[1].f, args[2].f
		return node{t: out, f: func(row []any) (val, error) {
			t, known, err := isTrue(cf, row)
			if err != nil {
				return nullVal, err
			}
			var v val
			if known && t {
				v, err = af(row)
			} else {
				v, err = bf(row)
			}
			return convertTo(v, out), err
		}}, nil
	case "ifnull", "coalesce":
		ts := make([]typ, len(args))
		for i := range args {
			ts[i] = args[i].t
		}
		out := aggType(ts...)
		return node{t: out, f: func(row []any) (val, error) {
			for i := range args {
				v, err := args[i].f(row)
				if err != nil {
					return nullVal, err
				}
				if v.k != kNull {
					return convertTo(v, out), nil
				}
			}
			return nullVal, nil
		}}, nil
	case "nullif":
		cmp, err := newComparator(args[0].t, args[1].t)
		if err != nil {
			return node{}, err
		}
		now := c.nowFn()
		af, bf := args[0].f, args[1].f
		out := args[0].t
		out.enum, out.year = false, false // an ENUM/SET comes back as its text
		return node{t: out, f: func(row []any) (val, error) {
			a, err := af(row)
			if err != nil || a.k == kNull {
				return nullVal, err
			}
			b, err := bf(row)
			if err != nil {
				return nullVal, err
			}
			if b.k != kNull {
				if n, ok := cmp.cmp(a, b, now); ok && n == 0 {
					return nullVal, nil
				}
			}
			a.hasNum = false
			return a, nil
		}}, nil
	case "length":
		// LENGTH counts bytes in the value's charset: latin1 text, held as
		// UTF-8 here, has one byte per character there.
		oneByte := args[0].t.k == kStr && args[0].t.coll != nil && strings.HasPrefix(args[0].t.coll.name, "latin1_")
		return intFunc1(args[0], func(v val) (val, error) {
			if oneByte {
				return intVal(int64(utf8.RuneCountInString(v.toStr()))), nil
			}
			return intVal(int64(len(v.toStr()))), nil
		}), nil
	case "char_length", "character_length":
		bin := args[0].t.k == kStr && args[0].t.coll == binaryColl
		return intFunc1(args[0], func(v val) (val, error) {
			s := v.toStr()
			if bin {
				return intVal(int64(len(s))), nil
			}
			return intVal(int64(utf8.RuneCountInString(s))), nil
		}), nil
	case "concat", "concat_ws":
		return concat(args, name == "concat_ws")
	case "substring", "substr", "left", "right":
		return substring(name, args), nil
	case "lower", "upper":
		t := strType(args[0].t)
		upper := name == "upper"
		f := args[0].f
		return node{t: t, f: func(row []any) (val, error) {
			v, err := f(row)
			if err != nil || v.k == kNull {
				return nullVal, err
			}
			s := v.toStr()
			if t.coll != binaryColl {
				if upper {
					s = strings.Map(unicode.ToUpper, s)
				} else {
					s = strings.Map(unicode.ToLower, s)
				}
			}
			return strVal(s, t.coll), nil
		}}, nil
	case "locate", "instr":
		sub, str := args[0], args[1]
		if name == "instr" {
			sub, str = args[1], args[0]
		}
		var pos *node
		if len(args) == 3 {
			pos = &args[2]
		}
		return locate(sub, str, pos)
	case "replace":
		t := strType(args[0].t)
		return node{t: t, f: func(row []any) (val, error) {
			var s [3]string
			for i := range 3 {
				v, err := args[i].f(row)
				if err != nil || v.k == kNull {
					return nullVal, err
				}
				s[i] = v.toStr()
			}
			if s[1] == "" {
				return strVal(s[0], t.coll), nil
			}
			return strVal(strings.ReplaceAll(s[0], s[1], s[2]), t.coll), nil
		}}, nil
	case "abs", "sign", "floor", "ceil", "ceiling":
		return numFunc1(name, args[0]), nil
	case "round":
		return round(args), nil
	case "mod":
		return arith(opcode.Mod, args[0], args[1])
	case "year", "month", "day", "dayofmonth", "hour", "minute":
		return datePart(name, args[0], c.now), nil
	case "date":
		f := args[0].f
		now := c.now
		return node{t: typ{k: kTime, date: true}, f: func(row []any) (val, error) {
			v, err := f(row)
			if err != nil || v.k == kNull {
				return nullVal, err
			}
			p, _, ok := v.toDatetime(now)
			if !ok {
				return nullVal, nil
			}
			t := unpackDatetime(p)
			return timeVal(packDatetime(t.y, t.mo, t.d, 0, 0, 0, 0), true, 0), nil
		}}, nil
	case "datediff":
		af, bf := args[0].f, args[1].f
		now := c.now
		return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
			_, _, dx, dy, ok, err := datetimePair(af, bf, row, now)
			if !ok {
				return nullVal, err
			}
			return intVal(dx - dy), nil
		}}, nil
	case "unix_timestamp":
		return c.unixTimestamp(args[0]), nil
	case "json_extract":
		return jsonExtract(args)
	case "json_unquote":
		f := args[0].f
		// the result is utf8mb4_bin whatever the argument, coercible: a
		// column's collation wins over it (MariaDB compares
		// e > JSON_UNQUOTE(...) under e's collation)
		return node{t: typ{k: kStr, coll: binaryCollJSON, coer: coerCoercible}, f: func(row []any) (val, error) {
			v, err := f(row)
			if err != nil || v.k == kNull {
				return nullVal, err
			}
			s := v.toStr()
			if u, ok := jsonUnquote(strings.TrimSpace(s)); ok {
				s = u
			}
			return strVal(s, binaryCollJSON), nil
		}}, nil
	}
	return node{}, refuse(fmt.Sprintf("the function %s", strings.ToUpper(x.FnName.O)))
}

// strType is the string type of a function over t: its collation, or the
// literal collation for a number.
func strType(t typ) typ {
	if t.k == kStr {
		return typ{k: kStr, coll: t.coll, coer: t.coer}
	}
	return typ{k: kStr, coll: defaultColl, coer: coerCoercible}
}

func intFunc1(a node, fn func(val) (val, error)) node {
	f := a.f
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		v, err := f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		return fn(v)
	}}
}

func concat(args []node, ws bool) (node, error) {
	// the result's collation is aggregated over the string arguments
	// (numbers, whose derivation is the weakest, do not count)
	t := typ{k: kStr, coll: defaultColl, coer: coerCoercible}
	var ts []typ
	for _, a := range args {
		switch {
		case a.t.k == kStr:
			ts = append(ts, a.t)
			t.coer = min(t.coer, a.t.coer)
		case a.t.bit:
			// a BIT column is a byte string here: CONCAT(c, bt) is binary
			ts = append(ts, typ{k: kStr, coll: binaryColl, coer: coerImplicit})
			t.coer = min(t.coer, coerImplicit)
		}
	}
	coll, err := aggCollAll(ts...)
	if err != nil {
		return node{}, err
	}
	if coll != nil {
		t.coll = coll
	}
	return node{t: t, f: func(row []any) (val, error) {
		var b strings.Builder
		var sep string
		first := true
		for i := range args {
			v, err := args[i].f(row)
			if err != nil {
				return nullVal, err
			}
			if ws && i == 0 {
				if v.k == kNull {
					return nullVal, nil
				}
				sep = v.toStr()
				continue
			}
			if v.k == kNull {
				if ws {
					continue
				}
				return nullVal, nil
			}
			if ws && !first {
				b.WriteString(sep)
			}
			first = false
			b.WriteString(v.toStr())
		}
		return strVal(b.String(), t.coll), nil
	}}, nil
}

// substr returns characters [from, from+n) of s (0-based; n < 0: to the end).
func substr(s string, binary bool, from, n int64) string {
	if binary {
		if from >= int64(len(s)) {
			return ""
		}
		end := int64(len(s))
		if n >= 0 && from+n < end {
			end = from + n
		}
		return s[from:end]
	}
	start, i := -1, int64(0)
	for off := range s {
		if i == from {
			start = off
		}
		if n >= 0 && i == from+n {
			return s[start:off]
		}
		i++
	}
	if start < 0 {
		return ""
	}
	return s[start:]
}

func charCount(s string, binary bool) int64 {
	if binary {
		return int64(len(s))
	}
	return int64(utf8.RuneCountInString(s))
}

func substring(name string, args []node) node {
	t := strType(args[0].t)
	bin := t.coll == binaryColl
	return node{t: t, f: func(row []any) (val, error) {
		v, err := args[0].f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		p, err := args[1].f(row)
		if err != nil || p.k == kNull {
			return nullVal, err
		}
		s := v.toStr()
		pos, pu := p.toInt()
		if pu && pos < 0 {
			pos = math.MaxInt64
		}
		total := charCount(s, bin)
		switch name {
		case "left":
			if pos <= 0 {
				return strVal("", t.coll), nil
			}
			return strVal(substr(s, bin, 0, pos), t.coll), nil
		case "right":
			if pos <= 0 {
				return strVal("", t.coll), nil
			}
			if pos >= total {
				return strVal(s, t.coll), nil
			}
			return strVal(substr(s, bin, total-pos, -1), t.coll), nil
		}
		n := int64(-1)
		if len(args) == 3 {
			l, err := args[2].f(row)
			if err != nil || l.k == kNull {
				return nullVal, err
			}
			var lu bool
			n, lu = l.toInt()
			if lu && n < 0 {
				n = math.MaxInt64
			}
			if n <= 0 {
				return strVal("", t.coll), nil
			}
		}
		var from int64
		switch {
		case pos == 0:
			return strVal("", t.coll), nil
		case pos > 0:
			from = pos - 1
		default:
			from = total + pos
			if from < 0 {
				return strVal("", t.coll), nil
			}
		}
		if from >= total {
			return strVal("", t.coll), nil
		}
		return strVal(substr(s, bin, from, n), t.coll), nil
	}}
}

func (c *compiler) trim(x *ast.FuncCallExpr) (node, error) {
	args := x.Args
	dir := ast.TrimBoth
	if len(args) == 3 {
		dir = args[2].(*ast.TrimDirectionExpr).Direction
		if dir == ast.TrimBothDefault {
			dir = ast.TrimBoth
		}
		args = args[:2]
		if isTrimPlaceholder(x) {
			args = args[:1]
		}
	}
	ns, err := c.compileAll(args)
	if err != nil {
		return node{}, err
	}
	t := strType(ns[0].t)
	return node{t: t, f: func(row []any) (val, error) {
		v, err := ns[0].f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		rem := " "
		if len(ns) == 2 {
			r, err := ns[1].f(row)
			if err != nil || r.k == kNull {
				return nullVal, err
			}
			rem = r.toStr()
		}
		s := v.toStr()
		if rem != "" {
			if dir == ast.TrimBoth || dir == ast.TrimLeading {
				for strings.HasPrefix(s, rem) {
					s = s[len(rem):]
				}
			}
			if dir == ast.TrimBoth || dir == ast.TrimTrailing {
				for strings.HasSuffix(s, rem) {
					s = s[:len(s)-len(rem)]
				}
			}
		}
		return strVal(s, t.coll), nil
	}}, nil
}

// locate is LOCATE(sub, str[, pos]) / INSTR(str, sub): the 1-based
// character position of sub in str under their collation, 0 when absent.
func locate(sub, str node, pos *node) (node, error) {
	coll, err := aggColl(strType(sub.t), strType(str.t))
	if err != nil {
		return node{}, err
	}
	bin := coll == binaryColl
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		a, err := sub.f(row)
		if err != nil || a.k == kNull {
			return nullVal, err
		}
		b, err := str.f(row)
		if err != nil || b.k == kNull {
			return nullVal, err
		}
		start := int64(1)
		if pos != nil {
			p, err := pos.f(row)
			if err != nil || p.k == kNull {
				return nullVal, err
			}
			var u bool
			start, u = p.toInt()
			if u && start < 0 {
				return intVal(0), nil
			}
		}
		s, needle := b.toStr(), a.toStr()
		total := charCount(s, bin)
		if start < 1 || start > total+1 {
			return intVal(0), nil
		}
		rest := substr(s, bin, start-1, -1)
		i := coll.indexOf(rest, needle)
		if i < 0 {
			return intVal(0), nil
		}
		return intVal(start + charCount(rest[:i], bin)), nil
	}}, nil
}

func numFunc1(name string, a node) node {
	k, scale := numClass(a.t)
	out := typ{k: k, scale: scale, uns: a.t.uns}
	switch name {
	case "sign":
		out = typ{k: kInt}
	case "floor", "ceil", "ceiling":
		if k == kDec {
			out = typ{k: kDec}
		}
	}
	f := a.f
	return node{t: out, f: func(row []any) (val, error) {
		v, err := f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		switch name {
		case "sign":
			switch k {
			case kFloat:
				x := v.toFloat()
				return intVal(int64(compare3(x, 0))), nil
			case kDec:
				return intVal(int64(v.toDec().Sign())), nil
			case kUint:
				return boolVal(v.i != 0), nil
			}
			n, _ := v.toInt()
			return intVal(int64(compare3(n, 0))), nil
		case "abs":
			switch k {
			case kFloat:
				return floatVal(math.Abs(v.toFloat())), nil
			case kDec:
				return decVal(v.toDec().Abs()), nil
			case kUint:
				return uintVal(uint64(v.i)), nil
			}
			n, _ := v.toInt()
			if n == math.MinInt64 {
				return nullVal, errOutOfRange
			}
			if n < 0 {
				n = -n
			}
			return intVal(n), nil
		}
		up := name != "floor"
		switch k {
		case kFloat:
			if up {
				return floatVal(math.Ceil(v.toFloat())), nil
			}
			return floatVal(math.Floor(v.toFloat())), nil
		case kDec:
			if up {
				return decVal(v.toDec().Ceil()), nil
			}
			return decVal(v.toDec().Floor()), nil
		}
		if k == kUint {
			return uintVal(uint64(v.i)), nil
		}
		n, _ := v.toInt()
		return intVal(n), nil
	}}
}

// round is ROUND(x[, d]): DECIMAL and integers half away from zero,
// DOUBLE half to even (MariaDB's rint()).
func round(args []node) node {
	k, scale := numClass(args[0].t)
	out := typ{k: k, scale: scale}
	var dConst *int64
	if len(args) == 2 {
		if lit, ok := constInt(args[1]); ok {
			dConst = &lit
		}
	} else {
		z := int64(0)
		dConst = &z
	}
	if k == kDec && dConst != nil {
		out.scale = int32(max(0, min(*dConst, int64(scale))))
	}
	return node{t: out, f: func(row []any) (val, error) {
		v, err := args[0].f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		d := int64(0)
		if len(args) == 2 {
			dv, err := args[1].f(row)
			if err != nil || dv.k == kNull {
				return nullVal, err
			}
			d, _ = dv.toInt()
		}
		d = max(-65, min(d, 38))
		switch k {
		case kFloat:
			x := v.toFloat()
			p := math.Pow10(int(abs64(d)))
			if d >= 0 {
				y := math.RoundToEven(x*p) / p
				if math.IsInf(x*p, 0) {
					y = x
				}
				return floatVal(y), nil
			}
			return floatVal(math.RoundToEven(x/p) * p), nil
		case kDec:
			r := v.toDec().Round(int32(d))
			if d >= 0 && int32(d) > fracDigits(v.d) {
				r = v.toDec()
			}
			return decVal(r), nil
		}
		if d >= 0 {
			return v, nil
		}
		if d < -19 {
			return intVal(0), nil
		}
		// a rounded BIGINT beyond the range saturates (MariaDB warns)
		dec := v.toDec().Round(int32(d))
		if k == kUint {
			if dec.GreaterThan(maxUint64Dec) {
				return uintVal(math.MaxUint64), nil
			}
			return uintVal(dec.BigInt().Uint64()), nil
		}
		switch {
		case dec.GreaterThan(maxInt64Dec):
			return intVal(math.MaxInt64), nil
		case dec.LessThan(minInt64Dec):
			return intVal(math.MinInt64), nil
		}
		return intVal(dec.IntPart()), nil
	}}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// constInt reads a node that is an integer constant.
func constInt(n node) (int64, bool) {
	if n.t.k != kInt && n.t.k != kUint {
		return 0, false
	}
	v, err := n.f(nil)
	if err != nil || v.k == kNull {
		return 0, false
	}
	i, _ := v.toInt()
	return i, true
}

func datePart(name string, a node, now nowFn) node {
	f := a.f
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		v, err := f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		switch name {
		case "hour", "minute":
			var us int64
			switch v.k {
			case kDur:
				us = v.i
			case kTime:
				us, _ = v.toDuration()
			case kStr:
				var ok bool
				if us, ok = strToTimeOfDay(v.s); !ok {
					return nullVal, nil
				}
			default:
				var ok bool
				if us, ok = numberToTimeOfDay(v); !ok {
					return nullVal, nil
				}
			}
			us = abs64(us)
			sec := us / 1e6
			if name == "hour" {
				return intVal(sec / 3600), nil
			}
			return intVal(sec / 60 % 60), nil
		}
		p, _, ok := v.toDatetime(now)
		if !ok {
			return nullVal, nil
		}
		t := unpackDatetime(p)
		switch name {
		case "year":
			return intVal(t.y), nil
		case "month":
			return intVal(t.mo), nil
		}
		return intVal(t.d), nil
	}}
}

// strToTimeOfDay reads a string as HOUR() and MINUTE() do: a DATETIME's
// time, else the TIME at the start of the string ('2020-01-02' reads as
// 20:20, i.e. 00:20:20, as in MariaDB).
func strToTimeOfDay(s string) (int64, bool) {
	if us, _, ok := parseDuration(s); ok {
		return us, true
	}
	if p, date, _, ok := parseDatetime(s); ok && !date {
		return val{k: kTime, i: p}.toDuration()
	}
	t := strings.TrimLeft(s, " \t\r\n")
	end := 0
	if end < len(t) && t[end] == '-' {
		end++
	}
	colons := 0
	for end < len(t) {
		ch := t[end]
		switch {
		case ch >= '0' && ch <= '9':
		case ch == ':' && colons < 2 && end+1 < len(t) && t[end+1] >= '0' && t[end+1] <= '9':
			colons++
		case ch == '.' && end+1 < len(t) && t[end+1] >= '0' && t[end+1] <= '9':
		default:
			goto done
		}
		end++
	}
done:
	if end+1 < len(t) && (t[end] == 'e' || t[end] == 'E') && (t[end+1] >= '0' && t[end+1] <= '9' || t[end+1] == '-' || t[end+1] == '+') {
		return 0, false // a number with an exponent, '1e2', is no TIME; '12abc' is 00:00:12
	}
	us, _, ok := parseDuration(t[:end])
	return us, ok
}

// numberToTimeOfDay reads a number as HOUR() and MINUTE() do: a
// YYYYMMDD[hhmmss] number as a DATETIME, else [-]hhmmss, clipped to
// 838:59:59.
func numberToTimeOfDay(v val) (int64, bool) {
	n, u := v.toInt()
	if u && n < 0 {
		n = math.MaxInt64
	}
	if v.k == kDec || v.k == kFloat {
		n = v.toDec().Truncate(0).IntPart()
	}
	if abs64(n) >= 10000101 {
		if p, _, ok := numberToDatetime(intVal(abs64(n))); ok {
			return val{k: kTime, i: p}.toDuration()
		}
	}
	const maxTime = 8385959
	if abs64(n) > maxTime {
		return ((838*60+59)*60 + 59) * 1e6, true
	}
	return v.toDuration()
}

// dayNumber is the day count from year 0 (MariaDB's calc_daynr); false
// for a date with zero parts.
func dayNumber(p int64) (int64, bool) {
	t := unpackDatetime(p)
	if t.y == 0 && t.mo == 0 && t.d == 0 {
		return 0, false
	}
	if t.mo == 0 || t.d == 0 {
		return 0, false
	}
	y, m, d := t.y, t.mo, t.d
	delsum := 365*y + 31*(m-1) + d
	if m <= 2 {
		y--
	} else {
		delsum -= (m*4 + 23) / 10
	}
	temp := ((y/100 + 1) * 3) / 4
	return delsum + y/4 - temp, true
}

// datetimePair evaluates the two arguments of DATEDIFF or TIMESTAMPDIFF
// as packed DATETIMEs with their day numbers; ok is false (the result
// NULL) when either is NULL or not a valid date, or on err.
func datetimePair(af, bf func([]any) (val, error), row []any, now func() time.Time) (x, y, dx, dy int64, ok bool, err error) {
	a, err := af(row)
	if err != nil || a.k == kNull {
		return 0, 0, 0, 0, false, err
	}
	b, err := bf(row)
	if err != nil || b.k == kNull {
		return 0, 0, 0, 0, false, err
	}
	x, _, ok1 := a.toDatetime(now)
	y, _, ok2 := b.toDatetime(now)
	if !ok1 || !ok2 {
		return 0, 0, 0, 0, false, nil
	}
	dx, okx := dayNumber(x)
	dy, oky := dayNumber(y)
	if !okx || !oky {
		return 0, 0, 0, 0, false, nil
	}
	return x, y, dx, dy, true, nil
}

func (c *compiler) timestampdiff(x *ast.FuncCallExpr) (node, error) {
	unit := x.Args[0].(*ast.TimeUnitExpr).Unit
	ns, err := c.compileAll(x.Args[1:])
	if err != nil {
		return node{}, err
	}
	now := c.now
	af, bf := ns[0].f, ns[1].f
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		x, y, dx, dy, ok, err := datetimePair(af, bf, row, now)
		if !ok {
			return nullVal, err
		}
		tx, ty := unpackDatetime(x), unpackDatetime(y)
		usx := dx*86400e6 + ((tx.h*60+tx.mi)*60+tx.s)*1e6 + tx.us
		usy := dy*86400e6 + ((ty.h*60+ty.mi)*60+ty.s)*1e6 + ty.us
		diff := usy - usx
		switch unit {
		case ast.TimeUnitMicrosecond:
			return intVal(diff), nil
		case ast.TimeUnitSecond:
			return intVal(diff / 1e6), nil
		case ast.TimeUnitMinute:
			return intVal(diff / 60e6), nil
		case ast.TimeUnitHour:
			return intVal(diff / 3600e6), nil
		case ast.TimeUnitDay:
			return intVal(diff / 86400e6), nil
		case ast.TimeUnitWeek:
			return intVal(diff / (7 * 86400e6)), nil
		}
		// months: whole months from a to b, a partial month not counted
		lo, hi, neg := tx, ty, false
		if diff < 0 {
			lo, hi, neg = ty, tx, true
		}
		months := (hi.y-lo.y)*12 + hi.mo - lo.mo
		if hi.d < lo.d || (hi.d == lo.d && ((hi.h*60+hi.mi)*60+hi.s)*1e6+hi.us < ((lo.h*60+lo.mi)*60+lo.s)*1e6+lo.us) {
			months--
		}
		if neg {
			months = -months
		}
		switch unit {
		case ast.TimeUnitQuarter:
			return intVal(months / 3), nil
		case ast.TimeUnitYear:
			return intVal(months / 12), nil
		}
		return intVal(months), nil
	}}, nil
}

// unixTimestamp is UNIX_TIMESTAMP(x): seconds since the epoch of x read
// in the session time zone (a DECIMAL with x's fraction); NULL for a
// value outside the TIMESTAMP range and for no date.
func (c *compiler) unixTimestamp(a node) node {
	fsp := int8(0)
	if a.t.k == kTime && !a.t.date {
		fsp = a.t.fsp
	}
	out := typ{k: kInt}
	if fsp > 0 {
		out = typ{k: kDec, scale: int32(fsp)}
	}
	loc, now, f := c.loc, c.now, a.f
	return node{t: out, f: func(row []any) (val, error) {
		v, err := f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		p, _, ok := v.toDatetime(now)
		if !ok {
			return nullVal, nil
		}
		t, ok := goTime(p, loc)
		if !ok || t.Before(time.Unix(0, 0)) || t.Unix() > 2147483647 {
			return nullVal, nil // outside the TIMESTAMP range: NULL, as MariaDB
		}
		if fsp > 0 {
			us := t.UnixMicro()
			return decVal(decimal.New(us, -6).Truncate(int32(fsp))), nil
		}
		return intVal(t.Unix()), nil
	}}
}
