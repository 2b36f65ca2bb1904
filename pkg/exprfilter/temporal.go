package exprfilter

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// A DATETIME / DATE / TIMESTAMP value is packed into an int64 that orders
// like the value: ((((year*13+month)*32+day)*24+hour)*60+minute)*60+second,
// times 1e6, plus microseconds (MariaDB packs its temporal values the same
// way). Zero dates and zero parts ("0000-00-00") keep their zeros.
func packDatetime(y, mo, d, h, mi, s, us int64) int64 {
	return (((((y*13+mo)*32+d)*24+h)*60+mi)*60+s)*1e6 + us
}

type dtParts struct{ y, mo, d, h, mi, s, us int64 }

func unpackDatetime(p int64) dtParts {
	var t dtParts
	t.us = p % 1e6
	p /= 1e6
	t.s = p % 60
	p /= 60
	t.mi = p % 60
	p /= 60
	t.h = p % 24
	p /= 24
	t.d = p % 32
	p /= 32
	t.mo = p % 13
	t.y = p / 13
	return t
}

func timeVal(p int64, date bool, fsp int8) val {
	return val{k: kTime, i: p, date: date, fsp: fsp}
}

// fromGoTime is a DATETIME of t's wall clock in its location.
func fromGoTime(t time.Time, fsp int8) val {
	us := int64(t.Nanosecond() / 1000)
	if fsp == 0 {
		us = 0
	}
	return timeVal(packDatetime(int64(t.Year()), int64(t.Month()), int64(t.Day()), int64(t.Hour()), int64(t.Minute()), int64(t.Second()), us), false, fsp)
}

// goTime turns a packed DATETIME into a time.Time in loc (false for a
// value with zero parts, which no instant has).
func goTime(p int64, loc *time.Location) (time.Time, bool) {
	t := unpackDatetime(p)
	if t.mo == 0 || t.d == 0 {
		return time.Time{}, false
	}
	return time.Date(int(t.y), time.Month(t.mo), int(t.d), int(t.h), int(t.mi), int(t.s), int(t.us)*1000, loc), true
}

func formatTime(v val) string {
	t := unpackDatetime(v.i)
	if v.date {
		return fmt.Sprintf("%04d-%02d-%02d", t.y, t.mo, t.d)
	}
	s := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", t.y, t.mo, t.d, t.h, t.mi, t.s)
	return s + fracText(t.us, v.fsp)
}

func fracText(us int64, fsp int8) string {
	if fsp <= 0 {
		return ""
	}
	f := fmt.Sprintf("%06d", us)
	return "." + f[:fsp]
}

func formatDur(v val) string {
	us := v.i
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	sec := us / 1e6
	return fmt.Sprintf("%s%02d:%02d:%02d", sign, sec/3600, sec/60%60, sec%60) + fracText(us%1e6, v.fsp)
}

// timeToNumber is a DATETIME / DATE in numeric context: YYYYMMDDhhmmss
// (YYYYMMDD for a DATE), a DECIMAL with the fraction when it has one.
func timeToNumber(v val) val {
	t := unpackDatetime(v.i)
	n := t.y*10000 + t.mo*100 + t.d
	if !v.date {
		n = n*1000000 + t.h*10000 + t.mi*100 + t.s
	}
	if v.fsp > 0 && !v.date {
		return decVal(decimal.New(n*1e6+t.us, -6).Truncate(int32(v.fsp)))
	}
	return intVal(n)
}

// durToNumber is a TIME in numeric context: [-]hhmmss[.frac].
func durToNumber(v val) val {
	us := v.i
	neg := us < 0
	if neg {
		us = -us
	}
	sec := us / 1e6
	n := sec/3600*10000 + sec/60%60*100 + sec%60
	if neg {
		n = -n
	}
	if v.fsp > 0 {
		f := n*1e6 + us%1e6
		if neg {
			f = n*1e6 - us%1e6
		}
		return decVal(decimal.New(f, -6).Truncate(int32(v.fsp)))
	}
	return intVal(n)
}

// parseDatetime reads a DATETIME / DATE text: the binlog decoder's
// "YYYY-MM-DD[ hh:mm:ss[.ffffff]]" and the forms MariaDB accepts in a
// literal: any punctuation as delimiter, a 'T' between date and time, or
// digits only (YYYYMMDD[hhmmss], YYMMDD[hhmmss]). ok false: not a date.
func parseDatetime(s string) (p int64, date bool, fsp int8, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false, 0, false
	}
	allDigits := true
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			if s[i] == '.' && i > 0 {
				continue
			}
			allDigits = false
			break
		}
	}
	if allDigits {
		whole, frac, _ := strings.Cut(s, ".")
		return parseDigitsDatetime(whole, frac)
	}
	var parts [7]int64
	var widths [7]int
	n := 0
	i := 0
	for n < 7 && i < len(s) {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i {
			return 0, false, 0, false
		}
		if j-i > 9 {
			return 0, false, 0, false
		}
		var x int64
		for k := i; k < j; k++ {
			x = x*10 + int64(s[k]-'0')
		}
		parts[n], widths[n] = x, j-i
		n++
		if j >= len(s) {
			i = j
			break
		}
		// one delimiter, or several spaces / a 'T' between date and time
		d := s[j]
		if n == 6 && d != '.' {
			return 0, false, 0, false
		}
		if n == 6 {
			i = j + 1
			continue
		}
		if d >= '0' && d <= '9' {
			return 0, false, 0, false
		}
		j++
		if n == 3 {
			for j < len(s) && (s[j] == ' ' || s[j] == 'T' || s[j] == 't') {
				j++
			}
		}
		i = j
	}
	if i < len(s) || n < 3 {
		return 0, false, 0, false
	}
	y := parts[0]
	if n == 7 {
		frac := s[len(s)-widths[6]:]
		fsp = int8(min(len(frac), 6))
		us := int64(0)
		for k := 0; k < 6; k++ {
			us *= 10
			if k < len(frac) {
				us += int64(frac[k] - '0')
			}
		}
		parts[6] = us
	}
	if widths[0] <= 2 && parts != [7]int64{} {
		// a two-digit year, unless the whole value is zero ('00:00:00'
		// is 0000-00-00, as in MariaDB)
		y = twoDigitYear(y)
	}
	if !validDate(y, parts[1], parts[2]) || parts[3] > 23 || parts[4] > 59 || parts[5] > 59 {
		return 0, false, 0, false
	}
	return packDatetime(y, parts[1], parts[2], parts[3], parts[4], parts[5], parts[6]), n == 3, fsp, true
}

func twoDigitYear(y int64) int64 {
	if y < 70 {
		return 2000 + y
	}
	return 1900 + y
}

func parseDigitsDatetime(whole, frac string) (int64, bool, int8, bool) {
	var y, mo, d, h, mi, sec int64
	num := func(s string) int64 {
		var x int64
		for i := 0; i < len(s); i++ {
			x = x*10 + int64(s[i]-'0')
		}
		return x
	}
	date := false
	switch len(whole) {
	case 14:
		y, mo, d, h, mi, sec = num(whole[0:4]), num(whole[4:6]), num(whole[6:8]), num(whole[8:10]), num(whole[10:12]), num(whole[12:14])
	case 12:
		y, mo, d, h, mi, sec = num(whole[0:2]), num(whole[2:4]), num(whole[4:6]), num(whole[6:8]), num(whole[8:10]), num(whole[10:12])
		if num(whole) != 0 || frac != "" && num(frac) != 0 {
			y = twoDigitYear(y)
		}
	case 8:
		y, mo, d, date = num(whole[0:4]), num(whole[4:6]), num(whole[6:8]), true
	case 6:
		y, mo, d, date = num(whole[0:2]), num(whole[2:4]), num(whole[4:6]), true
		if num(whole) != 0 {
			y = twoDigitYear(y)
		}
	default:
		return 0, false, 0, false
	}
	if !validDate(y, mo, d) || h > 23 || mi > 59 || sec > 59 {
		return 0, false, 0, false
	}
	var us int64
	fsp := int8(0)
	if frac != "" && !date {
		fsp = int8(min(len(frac), 6))
		for k := 0; k < 6; k++ {
			us *= 10
			if k < len(frac) {
				us += int64(frac[k] - '0')
			}
		}
	}
	return packDatetime(y, mo, d, h, mi, sec, us), date, fsp, true
}

// validDate accepts what MariaDB stores with the default sql_mode: zero
// parts allowed (NO_ZERO_DATE and NO_ZERO_IN_DATE are off), otherwise a
// real day of the month.
func validDate(y, mo, d int64) bool {
	if y > 9999 || mo > 12 || d > 31 {
		return false
	}
	if mo == 0 || d == 0 {
		return true
	}
	return d <= daysIn(y, mo)
}

func daysIn(y, mo int64) int64 {
	switch mo {
	case 4, 6, 9, 11:
		return 30
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	}
	return 31
}

// parseDuration reads a TIME text "[-][D ]hhh:mm:ss[.ffffff]" (also
// "hh:mm", and digits "hhmmss"). ok false: not a time.
func parseDuration(s string) (us int64, fsp int8, ok bool) {
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	if s == "" {
		return 0, 0, false
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	var h, m, sec int64
	if !strings.Contains(whole, ":") {
		x, ok := atoiDigits(whole)
		if !ok {
			return 0, 0, false
		}
		h, m, sec = x/10000, x/100%100, x%100
	} else {
		days := int64(0)
		if d, rest, ok := strings.Cut(whole, " "); ok {
			dd, ok := atoiDigits(d)
			if !ok {
				return 0, 0, false
			}
			days, whole = dd, strings.TrimSpace(rest)
		}
		fields := strings.Split(whole, ":")
		if len(fields) < 2 || len(fields) > 3 {
			return 0, 0, false
		}
		var vals [3]int64
		for i, f := range fields {
			x, ok := atoiDigits(f)
			if !ok {
				return 0, 0, false
			}
			vals[i] = x
		}
		h, m, sec = vals[0]+days*24, vals[1], vals[2]
	}
	if m > 59 || sec > 59 {
		return 0, 0, false
	}
	var f int64
	if hasFrac {
		if _, ok := atoiDigits(frac); !ok {
			return 0, 0, false
		}
		fsp = int8(min(len(frac), 6))
		for k := 0; k < 6; k++ {
			f *= 10
			if k < len(frac) {
				f += int64(frac[k] - '0')
			}
		}
	}
	us = ((h*60+m)*60+sec)*1e6 + f
	if neg {
		us = -us
	}
	const maxTime = ((838*60+59)*60 + 59) * 1e6
	if us > maxTime || us < -maxTime {
		return 0, 0, false
	}
	return us, fsp, true
}

func atoiDigits(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	var x int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		x = x*10 + int64(s[i]-'0')
	}
	return x, true
}

// numberToDatetime reads a number as MariaDB does in datetime context:
// YYYYMMDDhhmmss, YYMMDDhhmmss, YYYYMMDD or YYMMDD.
func numberToDatetime(v val) (int64, bool, bool) {
	var n int64
	var us int64
	switch v.k {
	case kInt:
		n = v.i
	case kUint:
		if v.i < 0 {
			return 0, false, false
		}
		n = v.i
	case kDec:
		n = v.d.Truncate(0).IntPart()
		us = v.d.Sub(v.d.Truncate(0)).Shift(6).Truncate(0).IntPart()
	case kFloat:
		if v.f < 0 || v.f > 1e15 || math.IsNaN(v.f) {
			return 0, false, false
		}
		n = int64(v.f)
		us = int64(math.Round((v.f - float64(n)) * 1e6))
	default:
		return 0, false, false
	}
	if n < 0 || us < 0 {
		return 0, false, false
	}
	// MariaDB's number_to_datetime: YYMMDD from 2000-01-01 to 2069-12-31
	// and 1970 to 1999, YYYYMMDD, then the same with hhmmss
	const yy = 70
	date := true
	switch {
	case n == 0 || n >= 10000101000000:
		date = n == 0
	case n < 101:
		return 0, false, false
	case n <= (yy-1)*10000+1231:
		n = (n + 20000000) * 1000000
	case n < yy*10000+101:
		return 0, false, false
	case n <= 991231:
		n = (n + 19000000) * 1000000
	case n < 10000101:
		return 0, false, false
	case n <= 99991231:
		n *= 1000000
	case n < 101000000:
		return 0, false, false
	case n <= (yy-1)*10000000000+1231235959:
		n, date = n+20000000000000, false
	case n < yy*10000000000+101000000:
		return 0, false, false
	case n <= 991231235959:
		n, date = n+19000000000000, false
	default:
		date = false
	}
	dpart, tpart := n/1000000, n%1000000
	y, mo, d := dpart/10000, dpart/100%100, dpart%100
	h, mi, sec := tpart/10000, tpart/100%100, tpart%100
	if !validDate(y, mo, d) || h > 23 || mi > 59 || sec > 59 {
		return 0, false, false
	}
	if date {
		us = 0
	}
	return packDatetime(y, mo, d, h, mi, sec, us), date, true
}

// toDatetime converts v to a packed DATETIME for a comparison or a
// temporal function: a DATETIME as is, a TIME on today's date, a string
// or a number read as a date (ok false: it is none).
func (v val) toDatetime(now func() time.Time) (int64, bool, bool) {
	switch v.k {
	case kTime:
		return v.i, v.date, true
	case kDur:
		t := now()
		base := packDatetime(int64(t.Year()), int64(t.Month()), int64(t.Day()), 0, 0, 0, 0)
		bt, _ := goTime(base, time.UTC)
		bt = bt.Add(time.Duration(v.i) * time.Microsecond)
		return fromGoTime(bt, 6).i, false, true
	case kStr:
		// any punctuation delimits, as in MariaDB: '00:00:00.5' is
		// 2000-00-00 05:00:00 and '10:20:30' no date at all
		p, date, _, ok := parseDatetime(v.s)
		return p, date, ok
	case kNull:
		return 0, false, false
	}
	return numberToDatetime(v)
}

// toDuration converts v to TIME microseconds.
func (v val) toDuration() (int64, bool) {
	switch v.k {
	case kDur:
		return v.i, true
	case kTime:
		t := unpackDatetime(v.i)
		return ((t.h*60+t.mi)*60+t.s)*1e6 + t.us, true
	case kStr:
		return strToTimeOfDay(v.s)
	case kNull:
		return 0, false
	}
	n, _ := v.toInt()
	neg := n < 0
	if neg {
		n = -n
	}
	h, m, s := n/10000, n/100%100, n%100
	if m > 59 || s > 59 {
		return 0, false
	}
	us := ((h*60+m)*60 + s) * 1e6
	if neg {
		us = -us
	}
	return us, true
}
