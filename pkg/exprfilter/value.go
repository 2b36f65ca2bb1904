package exprfilter

import (
	"math"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// kind is the evaluation type of a value, after MariaDB's type handlers:
// every value an expression computes is one of these.
type kind uint8

const (
	kNull  kind = iota
	kInt        // i, signed BIGINT
	kUint       // i holds the uint64 bits, BIGINT UNSIGNED
	kDec        // d, DECIMAL
	kFloat      // f, DOUBLE
	kStr        // s under coll; hasNum: i is the ENUM index / SET bitmask
	kTime       // i packed (see packDatetime); date: no time part; s: text when known
	kDur        // TIME: i signed microseconds; s: text when known
)

// val is one value. It is passed by value so that evaluating a tree of
// integer and string comparisons allocates nothing.
type val struct {
	k      kind
	date   bool // kTime: a DATE (no time part)
	hasNum bool // kStr: an ENUM or SET member whose number is i
	negz   bool // kDec: MariaDB's "-0" that a DECIMAL % leaves, less than 0
	bitLen int8 // kUint from a BIT(n) column: its text is these many big-endian bytes
	f32    bool // kFloat from a FLOAT column: its text is the shortest float32 form
	fsp    int8 // kTime/kDur: fractional-second digits; kDec: unused
	i      int64
	f      float64
	d      decimal.Decimal
	s      string
	coll   *collation // kStr; nil means binary
}

var nullVal = val{}

func intVal(i int64) val   { return val{k: kInt, i: i} }
func uintVal(u uint64) val { return val{k: kUint, i: int64(u)} }
func floatVal(f float64) val {
	return val{k: kFloat, f: f}
}
func decVal(d decimal.Decimal) val { return val{k: kDec, d: d} }
func strVal(s string, c *collation) val {
	return val{k: kStr, s: s, coll: c}
}
func boolVal(b bool) val {
	if b {
		return intVal(1)
	}
	return intVal(0)
}

func (v val) isNull() bool { return v.k == kNull }

// toFloat is MariaDB's val_real.
func (v val) toFloat() float64 {
	switch v.k {
	case kInt:
		return float64(v.i)
	case kUint:
		return float64(uint64(v.i))
	case kDec:
		f, _ := v.d.Float64()
		return f
	case kFloat:
		return v.f
	case kStr:
		if v.hasNum {
			return float64(uint64(v.i))
		}
		return strToFloat(v.s)
	case kTime:
		return timeToNumber(v).toFloat()
	case kDur:
		return durToNumber(v).toFloat()
	}
	return 0
}

// toDec is MariaDB's val_decimal.
func (v val) toDec() decimal.Decimal {
	switch v.k {
	case kInt:
		return decimal.New(v.i, 0)
	case kUint:
		if v.i >= 0 {
			return decimal.New(v.i, 0)
		}
		d, _ := decimal.NewFromString(strconv.FormatUint(uint64(v.i), 10))
		return d
	case kDec:
		return v.d
	case kFloat:
		if math.IsInf(v.f, 0) || math.IsNaN(v.f) {
			return decimal.Zero
		}
		return decimal.NewFromFloat(v.f)
	case kStr:
		if v.hasNum {
			return uintVal(uint64(v.i)).toDec()
		}
		return strToDec(v.s)
	case kTime:
		return timeToNumber(v).toDec()
	case kDur:
		return durToNumber(v).toDec()
	}
	return decimal.Zero
}

// toInt is MariaDB's val_int (signed view; unsigned flag separately).
// Decimals and doubles round half away from zero, strings are read as
// integers with the leading number (MariaDB's string-to-int truncation).
func (v val) toInt() (int64, bool) {
	switch v.k {
	case kInt:
		return v.i, false
	case kUint:
		return v.i, true
	case kDec:
		r := v.d.Round(0)
		if r.GreaterThan(maxInt64Dec) {
			return math.MaxInt64, false
		}
		if r.LessThan(minInt64Dec) {
			return math.MinInt64, false
		}
		return r.IntPart(), false
	case kFloat:
		return floatToInt(v.f), false
	case kStr:
		if v.hasNum {
			return v.i, false
		}
		return strToInt(v.s)
	case kTime, kDur:
		var n val
		if v.k == kTime {
			n = timeToNumber(v)
		} else {
			n = durToNumber(v)
		}
		return n.toInt()
	}
	return 0, false
}

var (
	maxInt64Dec = decimal.New(math.MaxInt64, 0)
	minInt64Dec = decimal.New(math.MinInt64, 0)
)

func floatToInt(f float64) int64 {
	r := math.Round(f)
	if r >= 9.223372036854775807e18 {
		return math.MaxInt64
	}
	if r <= -9.223372036854775808e18 {
		return math.MinInt64
	}
	return int64(r)
}

// truthy is MariaDB's val_bool: NULL is unknown (second result false).
func (v val) truthy() (truth, known bool) {
	switch v.k {
	case kNull:
		return false, false
	case kInt, kUint:
		return v.i != 0, true
	case kDec:
		return !v.d.IsZero(), true
	case kFloat:
		return v.f != 0, true
	case kTime, kDur:
		return v.i != 0, true
	case kStr:
		if v.hasNum {
			return v.i != 0, true
		}
		return strToFloat(v.s) != 0, true
	}
	return false, false
}

// numPrefix returns the longest prefix of s (after leading spaces) that
// reads as a number the way MariaDB's string-to-number conversion reads
// it: sign, digits, a fraction, an exponent.
func numPrefix(s string) (string, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v') {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	isFrac := false
	if i < len(s) && s[i] == '.' {
		j := i + 1
		fd := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			fd++
		}
		if digits > 0 || fd > 0 {
			i = j
			digits += fd
			isFrac = true
		}
	}
	if digits == 0 {
		return "", false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		ed := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			ed++
		}
		if ed > 0 {
			i = j
			isFrac = true
		}
	}
	return s[start:i], isFrac
}

func strToFloat(s string) float64 {
	p, _ := numPrefix(s)
	if p == "" {
		return 0
	}
	f, err := strconv.ParseFloat(p, 64)
	if err != nil {
		// out of range: ParseFloat returns ±Inf; MariaDB saturates at DBL_MAX
		if math.IsInf(f, 1) {
			return math.MaxFloat64
		}
		if math.IsInf(f, -1) {
			return -math.MaxFloat64
		}
	}
	return f
}

func strToDec(s string) decimal.Decimal {
	p, _ := numPrefix(s)
	if p == "" {
		return decimal.Zero
	}
	d, err := decimal.NewFromString(p)
	if err != nil {
		return decimal.Zero
	}
	return d
}

// strToInt reads the leading integer of s, rounding a fraction as MariaDB
// does for a string in integer context (it goes through double).
func strToInt(s string) (int64, bool) {
	p, frac := numPrefix(s)
	if p == "" {
		return 0, false
	}
	if !frac {
		if n, err := strconv.ParseInt(p, 10, 64); err == nil {
			return n, false
		}
		if u, err := strconv.ParseUint(strings.TrimPrefix(p, "+"), 10, 64); err == nil {
			return int64(u), true
		}
		if strings.HasPrefix(p, "-") {
			return math.MinInt64, false
		}
		return -1, true // saturates at the unsigned maximum
	}
	return floatToInt(strToFloat(p)), false
}

// toStr is MariaDB's val_str for the value (numbers in their SQL text form).
func (v val) toStr() string {
	switch v.k {
	case kStr:
		return v.s
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kUint:
		if v.bitLen > 0 {
			b := make([]byte, v.bitLen)
			for j := range b {
				b[j] = byte(uint64(v.i) >> (8 * (int(v.bitLen) - 1 - j)))
			}
			return string(b)
		}
		return strconv.FormatUint(uint64(v.i), 10)
	case kDec:
		return formatDec(v.d)
	case kFloat:
		if v.f32 {
			return formatFloat32(float32(v.f))
		}
		return formatFloat(v.f)
	case kTime:
		if v.s != "" {
			return v.s
		}
		return formatTime(v)
	case kDur:
		if v.s != "" {
			return v.s
		}
		return formatDur(v)
	}
	return ""
}

// formatDec writes d with its own scale (trailing zeros kept, as DECIMAL
// values print).
func formatDec(d decimal.Decimal) string {
	if d.Exponent() < 0 {
		return d.StringFixed(-d.Exponent())
	}
	return d.String()
}

// formatFloat32 writes a FLOAT column's value as MariaDB does: the
// shortest text that reads back as the same float (1.1, not
// 1.100000023841858).
func formatFloat32(f float32) string {
	if f == 0 {
		return "0"
	}
	a := math.Abs(float64(f))
	if a >= 1e15 || a < 1e-4 {
		return expForm(strconv.FormatFloat(float64(f), 'e', -1, 32))
	}
	return strconv.FormatFloat(float64(f), 'f', -1, 32)
}

// expForm rewrites Go's 1.5e+15 / 1.5e-05 as MariaDB's 1.5e15 / 1.5e-5.
func expForm(s string) string {
	mant, exp, _ := strings.Cut(s, "e")
	exp = strings.TrimPrefix(exp, "+")
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")
	if neg {
		exp = "-" + exp
	}
	return mant + "e" + exp
}

// formatFloat writes a double the way MariaDB's val_str does for a DOUBLE
// expression: the shortest text that reads back, in exponent form from
// 1e15 up or below 1e-4 (MariaDB's %g-like rules).
func formatFloat(f float64) string {
	if f == 0 {
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e15 || a < 1e-4 {
		return expForm(strconv.FormatFloat(f, 'e', -1, 64))
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
