package shardschema

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// Order of two definitions in the lattice.
const (
	orderEqual = iota
	orderWider
	orderNarrower
	orderNone // incomparable
)

// ladders are the type families whose members widen in this order.
var ladders = map[string][]string{
	"int":  {"tinyint", "smallint", "mediumint", "int", "bigint"},
	"real": {"float", "double"},
	"text": {"tinytext", "text", "mediumtext", "longtext"},
	"blob": {"tinyblob", "blob", "mediumblob", "longblob"},
}

// sized are the types that widen by their length argument.
var sized = []string{"char", "varchar", "binary", "varbinary", "bit"}

// scaled are the types that widen by their fractional-second digits.
var scaled = []string{"datetime", "timestamp", "time"}

// typeShape is what the lattice compares of a column type.
type typeShape struct {
	family   string // ladder name, the data type itself otherwise
	rank     int    // position on the ladder
	length   int    // sized types
	scale    int    // decimal scale, fractional digits
	intDigit int    // decimal precision - scale
	unsigned bool
	zerofill bool
	elems    []string // enum, set
	raw      string   // COLUMN_TYPE in lower case, for the types compared as a whole
}

func shapeOf(c *sqlschema.Column) typeShape {
	dt := strings.ToLower(c.DataType)
	raw := strings.ToLower(strings.TrimSpace(c.ColumnType))
	s := typeShape{family: dt, raw: raw, unsigned: strings.Contains(raw, "unsigned"),
		zerofill: strings.Contains(raw, "zerofill")}
	for name, ladder := range ladders {
		if i := slices.Index(ladder, dt); i >= 0 {
			s.family, s.rank = name, i
			return s
		}
	}
	args := typeArgs(raw)
	switch {
	case dt == "decimal" || dt == "numeric":
		s.family = "decimal"
		p, sc := 10, 0 // DECIMAL means DECIMAL(10,0)
		if args != "" {
			ps, ss, _ := strings.Cut(args, ",")
			p, sc = atoi(ps), atoi(ss)
		}
		s.scale, s.intDigit = sc, p-sc
	case slices.Contains(sized, dt):
		s.length = atoi(args)
		if args == "" {
			s.length = 1
		}
	case slices.Contains(scaled, dt):
		s.scale = atoi(args)
	case dt == "enum" || dt == "set":
		s.elems = c.Elems
	}
	return s
}

// typeArgs is what is between the first "(" and its ")".
func typeArgs(columnType string) string {
	open := strings.IndexByte(columnType, '(')
	end := strings.IndexByte(columnType, ')')
	if open < 0 || end < open {
		return ""
	}
	return columnType[open+1 : end]
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return n
}

// combine folds one component's order into the order so far.
func combine(acc, o int) int {
	switch {
	case o == orderEqual || acc == o:
		return acc
	case acc == orderEqual:
		return o
	}
	return orderNone
}

// cmpInt orders two sizes: b wider than a when larger.
func cmpInt(a, b int) int {
	switch {
	case a == b:
		return orderEqual
	case b > a:
		return orderWider
	}
	return orderNarrower
}

// typeOrder says how type b relates to type a (orderWider: b holds every
// value of a) and, when they are incomparable, why.
func typeOrder(a, b *sqlschema.Column) (int, string) {
	sa, sb := shapeOf(a), shapeOf(b)
	if sa.family != sb.family {
		return orderNone, fmt.Sprintf("%s and %s are on no common widening ladder", a.ColumnType, b.ColumnType)
	}
	if sa.unsigned != sb.unsigned || sa.zerofill != sb.zerofill {
		return orderNone, fmt.Sprintf("%s and %s differ in signedness or zerofill", a.ColumnType, b.ColumnType)
	}
	switch {
	case ladders[sa.family] != nil:
		o := cmpInt(sa.rank, sb.rank)
		if o == orderEqual && sa.family == "real" && sa.raw != sb.raw {
			return orderNone, fmt.Sprintf("%s and %s have different precisions", a.ColumnType, b.ColumnType)
		}
		return o, ""
	case sa.family == "decimal":
		o := combine(cmpInt(sa.intDigit, sb.intDigit), cmpInt(sa.scale, sb.scale))
		if o == orderNone {
			return o, fmt.Sprintf("neither of %s and %s holds every value of the other", a.ColumnType, b.ColumnType)
		}
		return o, ""
	case slices.Contains(sized, sa.family):
		return cmpInt(sa.length, sb.length), ""
	case slices.Contains(scaled, sa.family):
		return cmpInt(sa.scale, sb.scale), ""
	case sa.family == "enum" || sa.family == "set":
		switch {
		case slices.Equal(sa.elems, sb.elems):
			return orderEqual, ""
		case len(sb.elems) > len(sa.elems) && slices.Equal(sb.elems[:len(sa.elems)], sa.elems):
			return orderWider, ""
		case len(sa.elems) > len(sb.elems) && slices.Equal(sa.elems[:len(sb.elems)], sb.elems):
			return orderNarrower, ""
		}
		return orderNone, fmt.Sprintf("%s and %s: neither member list extends the other at its end", a.ColumnType, b.ColumnType)
	}
	if sa.raw != sb.raw {
		return orderNone, fmt.Sprintf("%s and %s differ and do not widen one into the other", a.ColumnType, b.ColumnType)
	}
	return orderEqual, ""
}

// columnOrder says how definition b of a column relates to definition a:
// the type's order combined with nullability (NULL is wider); a
// difference in anything else (character set, default, generated,
// invisible) or components that disagree make them incomparable.
func columnOrder(a, b *sqlschema.Column) (int, string) {
	o, why := typeOrder(a, b)
	if o == orderNone {
		return o, why
	}
	switch {
	case a.Charset != b.Charset:
		return orderNone, fmt.Sprintf("character set %s differs from %s", charsetName(a), charsetName(b))
	case (a.HasDefault != b.HasDefault || a.Default != b.Default) && !(a.Nullable != b.Nullable && nullDefault(a) && nullDefault(b)):
		return orderNone, fmt.Sprintf("default %s differs from %s", defaultText(a), defaultText(b))
	case a.Generated != b.Generated:
		return orderNone, "one definition is a generated column, the other is not"
	case a.Invisible != b.Invisible:
		return orderNone, "one definition is INVISIBLE, the other is not"
	}
	n := orderEqual
	switch {
	case !a.Nullable && b.Nullable:
		n = orderWider
	case a.Nullable && !b.Nullable:
		n = orderNarrower
	}
	if c := combine(o, n); c != orderNone {
		return c, ""
	}
	return orderNone, fmt.Sprintf("%s to %s widens one of type and NULL and narrows the other", definition(a), definition(b))
}

func charsetName(c *sqlschema.Column) string {
	if c.Charset == "" {
		return "(none)"
	}
	return c.Charset
}

func defaultText(c *sqlschema.Column) string {
	if !c.HasDefault {
		return "(none)"
	}
	return c.Default
}
