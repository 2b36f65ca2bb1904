package exprfilter

import (
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	driver "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// aggType is the result type of CASE, IF, IFNULL, COALESCE (MariaDB's
// type aggregation for a hybrid result): all strings give a string under
// the aggregated collation; all numbers the widest number; all the same
// temporal type that type; any other mix a string.
func aggType(ts ...typ) typ {
	var out typ
	first := true
	for _, t := range ts {
		if t.k == kNull {
			continue
		}
		if first {
			out, first = t, false
			out.coer = max(out.coer, coerImplicit)
			out.enum, out.year = false, false // ENUM/SET values come back as text
			continue
		}
		switch {
		case out.k == kStr && t.k == kStr:
			if c, err := aggColl(out, t); err == nil {
				out.coll = c
			}
			out.coer = min(out.coer, t.coer)
			out.enum, out.json = false, out.json && t.json
		case isNum(out.k) && isNum(t.k):
			switch {
			case out.k == kFloat || t.k == kFloat:
				out = typ{k: kFloat}
			case out.k == kDec || t.k == kDec:
				out = typ{k: kDec, scale: max(out.scale, t.scale)}
			case out.k != t.k: // signed and unsigned
				out = typ{k: kDec}
			}
		case out.k == t.k && (out.k == kTime || out.k == kDur):
			if out.date != t.date {
				out.date = false
			}
			out.fsp = max(out.fsp, t.fsp)
		default:
			// a number or temporal value as text has MariaDB's numeric
			// derivation, weaker than a string's
			coll, coer := defaultColl, coerNumeric
			if out.k == kStr {
				coll, coer = out.coll, out.coer
			} else if t.k == kStr {
				coll, coer = t.coll, t.coer
			}
			out = typ{k: kStr, coll: coll, coer: coer}
		}
	}
	if first {
		return typ{k: kNull, coer: coerNone}
	}
	return out
}

// convertTo turns a value into the aggregated type t.
func convertTo(v val, t typ) val {
	if v.k == kNull {
		return v
	}
	switch t.k {
	case kStr:
		if v.k == kStr {
			v.coll, v.hasNum = t.coll, false
			return v
		}
		return strVal(v.toStr(), t.coll)
	case kDec:
		if v.k == kDec {
			return v
		}
		return decVal(v.toDec())
	case kFloat:
		if v.k == kFloat {
			return v
		}
		return floatVal(v.toFloat())
	case kTime, kDur:
		// the aggregated type's fractional digits and date-ness decide the
		// value's text (COALESCE(dt, ts6) shows dt with six digits)
		if v.k == t.k && (v.fsp != t.fsp || v.date != t.date) {
			v.fsp, v.date, v.s = t.fsp, t.date, ""
		}
	}
	return v
}

func (c *compiler) compileAll(ns []ast.ExprNode) ([]node, error) {
	out := make([]node, len(ns))
	for i, n := range ns {
		var err error
		if out[i], err = c.compile(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *compiler) caseExpr(x *ast.CaseExpr) (node, error) {
	var value *node
	if x.Value != nil {
		v, err := c.compile(x.Value)
		if err != nil {
			return node{}, err
		}
		value = &v
	}
	type when struct {
		cond, result node
		cmp          comparator
	}
	whens := make([]when, len(x.WhenClauses))
	var ts []typ
	for i, w := range x.WhenClauses {
		cond, err := c.compile(w.Expr)
		if err != nil {
			return node{}, err
		}
		res, err := c.compile(w.Result)
		if err != nil {
			return node{}, err
		}
		whens[i] = when{cond: cond, result: res}
		if value != nil {
			if whens[i].cmp, err = newComparator(value.t, cond.t); err != nil {
				return node{}, err
			}
		}
		ts = append(ts, res.t)
	}
	if value != nil {
		cts := []typ{value.t}
		for i := range whens {
			cts = append(cts, whens[i].cond.t)
		}
		coll, err := aggCollAll(cts...)
		if err != nil {
			return node{}, err
		}
		for i := range whens {
			if whens[i].cmp.mode == cmpStr {
				whens[i].cmp.coll = coll
			}
		}
	}
	var elseNode *node
	if x.ElseClause != nil {
		e, err := c.compile(x.ElseClause)
		if err != nil {
			return node{}, err
		}
		elseNode = &e
		ts = append(ts, e.t)
	}
	out := aggType(ts...)
	now := c.nowFn()
	return node{t: out, f: func(row []any) (val, error) {
		var v val
		if value != nil {
			var err error
			if v, err = value.f(row); err != nil {
				return nullVal, err
			}
		}
		for i := range whens {
			w := &whens[i]
			if value != nil {
				if v.k == kNull {
					continue
				}
				b, err := w.cond.f(row)
				if err != nil {
					return nullVal, err
				}
				if b.k == kNull {
					continue
				}
				if n, ok := w.cmp.cmp(v, b, now); !ok || n != 0 {
					continue
				}
			} else {
				t, known, err := isTrue(w.cond.f, row)
				if err != nil {
					return nullVal, err
				}
				if !known || !t {
					continue
				}
			}
			r, err := w.result.f(row)
			return convertTo(r, out), err
		}
		if elseNode != nil {
			r, err := elseNode.f(row)
			return convertTo(r, out), err
		}
		return nullVal, nil
	}}, nil
}

// like compiles expr [NOT] LIKE pattern [ESCAPE 'c'] under the collation
// of the two (no padding: trailing spaces count).
func (c *compiler) like(x *ast.PatternLikeOrIlikeExpr) (node, error) {
	e, err := c.compile(x.Expr)
	if err != nil {
		return node{}, err
	}
	p, err := c.compile(x.Pattern)
	if err != nil {
		return node{}, err
	}
	et, pt := e.t, p.t
	if et.k != kStr {
		et = typ{k: kStr, coll: defaultColl, coer: 5}
	}
	if pt.k != kStr {
		pt = typ{k: kStr, coll: defaultColl, coer: 5}
	}
	coll, err := aggColl(et, pt)
	if err != nil {
		return node{}, err
	}
	escape := rune(x.Escape)
	if escape == 0 {
		escape = '\\'
	}
	ef, pf, not := e.f, p.f, x.Not
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		a, err := ef(row)
		if err != nil || a.k == kNull {
			return nullVal, err
		}
		b, err := pf(row)
		if err != nil || b.k == kNull {
			return nullVal, err
		}
		return boolVal(likeMatch(a.toStr(), b.toStr(), escape, coll) != not), nil
	}}, nil
}

// likeMatch matches s against a LIKE pattern: % any run, _ one character,
// the escape character makes the next one literal. Characters compare
// under coll (bytes for binary).
func likeMatch(s, p string, escape rune, coll *collation) bool {
	next := func(str string) (rune, int) {
		if coll.binary && coll == binaryColl {
			return rune(str[0]), 1
		}
		return utf8.DecodeRuneInString(str)
	}
	// iterative matching with backtracking on the last %
	si, pi := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			pr, pn := next(p[pi:])
			switch {
			case pr == '%':
				starP, starS = pi+pn, si
				pi += pn
				continue
			case pr == '_':
				_, sn := next(s[si:])
				si += sn
				pi += pn
				continue
			default:
				lit, ln := pr, pn
				if pr == escape && pi+pn < len(p) {
					lit, ln = next(p[pi+pn:])
					ln += pn
				}
				sr, sn := next(s[si:])
				if coll.charEq(sr, lit) {
					si += sn
					pi += ln
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, sn := next(s[starS:])
		starS += sn
		si, pi = starS, starP
	}
	for pi < len(p) {
		pr, pn := next(p[pi:])
		if pr != '%' {
			return false
		}
		pi += pn
	}
	return true
}

// regexp compiles expr [NOT] REGEXP pattern. The pattern must be a
// constant (it is compiled once); it is case-insensitive unless the
// collation is binary or _bin, as MariaDB's PCRE matching is.
func (c *compiler) regexp(x *ast.PatternRegexpExpr) (node, error) {
	e, err := c.compile(x.Expr)
	if err != nil {
		return node{}, err
	}
	lit, ok := x.Pattern.(*driver.ValueExpr)
	if !ok || (lit.Kind() != driver.KindString && lit.Kind() != driver.KindBytes) {
		return node{}, fmt.Errorf("REGEXP takes a constant string pattern, not %s", restore(x.Pattern))
	}
	pat := lit.GetString()
	et := e.t
	if et.k != kStr {
		et = typ{k: kStr, coll: defaultColl, coer: 5}
	}
	coll, err := aggColl(et, typ{k: kStr, coll: defaultColl, coer: coerCoercible})
	if err != nil {
		return node{}, err
	}
	src := pat
	bytewise := coll == binaryColl
	switch {
	case bytewise:
		// a byte string matches byte by byte: each byte becomes the
		// character of that code point, in the pattern and the subject
		src = bytesAsRunes(pat)
	case !coll.binary:
		src = "(?i)" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return node{}, fmt.Errorf("REGEXP pattern %q: %v (the filter uses RE2 syntax: no backreferences or lookaround)", pat, err)
	}
	ef, not := e.f, x.Not
	return node{t: typ{k: kInt}, f: func(row []any) (val, error) {
		a, err := ef(row)
		if err != nil || a.k == kNull {
			return nullVal, err
		}
		s := a.toStr()
		if bytewise {
			s = bytesAsRunes(s)
		}
		return boolVal(re.MatchString(s) != not), nil
	}}, nil
}

// bytesAsRunes maps each byte of s to the character of that code point.
func bytesAsRunes(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	rs := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		rs[i] = rune(s[i])
	}
	return string(rs)
}
