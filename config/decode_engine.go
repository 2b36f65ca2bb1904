package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// DecodeMode says what an unknown field does.
type DecodeMode int

const (
	// Strict makes unknown fields an error (files given to dmctl and the
	// ParseXxx/LoadXxxFile functions).
	Strict DecodeMode = iota
	// Lenient keeps decoding: unknown fields are dropped and listed in the
	// config's Notes (values read from etcd, written by any master).
	Lenient
)

// DecodeNotes records what decoding a config left out or renamed, with full
// field paths, sorted. It travels with the decoded config (field Notes,
// never encoded), so that whoever uses the config can warn about it.
type DecodeNotes struct {
	// Unknown lists fields neither this worker nor DM's format knows
	// (Lenient mode only; in Strict mode they are an error).
	Unknown []string
	// Ignored lists DM fields accepted without effect here (tuning of DM's
	// own engines, deprecated or no-op fields).
	Ignored []string
	// Renamed lists old DM names mapped to current ones, as "old → new".
	Renamed []string
}

// Empty reports whether there is nothing to warn about.
func (n DecodeNotes) Empty() bool {
	return len(n.Unknown) == 0 && len(n.Ignored) == 0 && len(n.Renamed) == 0
}

// Warning is the one-line warning for the ignored fields ("" when none).
func (n DecodeNotes) Warning() string {
	if len(n.Ignored) == 0 {
		return ""
	}
	return "DM fields accepted but without effect in this worker (tuning of DM's own engines, deprecated or no-op): " +
		strings.Join(n.Ignored, ", ")
}

// UnknownWarning is the one-line warning for unknown fields of a leniently
// decoded value ("" when none).
func (n DecodeNotes) UnknownWarning() string {
	if len(n.Unknown) == 0 {
		return ""
	}
	return "unknown fields (not used; check the writer of this value): " + strings.Join(n.Unknown, ", ")
}

// RenamedWarning is the one-line note for old DM names ("" when none).
func (n DecodeNotes) RenamedWarning() string {
	if len(n.Renamed) == 0 {
		return ""
	}
	return "old DM field names read as their current names: " + strings.Join(n.Renamed, ", ")
}

func (n DecodeNotes) clone() DecodeNotes {
	return DecodeNotes{Unknown: slices.Clone(n.Unknown), Ignored: slices.Clone(n.Ignored), Renamed: slices.Clone(n.Renamed)}
}

// DecodeError lists every field of one input that could not be taken: the
// unknown fields (Strict mode) and the refused DM fields. errors.Is(err,
// ErrInvalidConfig) holds.
type DecodeError struct {
	// What names the kind of config ("task config").
	What string
	// Unknown holds full paths, sorted.
	Unknown []string
	// Refused holds DM fields this worker cannot honour, with why.
	Refused []FieldError
}

// Error lists the unknown fields, then the refused ones, one per line.
func (e *DecodeError) Error() string {
	var b strings.Builder
	if len(e.Unknown) > 0 {
		fmt.Fprintf(&b, "%s: %d unknown field(s), neither in DM's format nor in this worker's (check spelling and indentation):", e.What, len(e.Unknown))
		for _, p := range e.Unknown {
			fmt.Fprintf(&b, "\n  unknown field %q", p)
		}
	}
	if len(e.Refused) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s: %d DM field(s) this worker cannot honour:", e.What, len(e.Refused))
		for _, fe := range e.Refused {
			b.WriteString("\n  " + fe.Error())
		}
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *DecodeError) Unwrap() error { return ErrInvalidConfig }

// ruleAction is what the engine does with a DM field that is not a field of
// the Go type.
type ruleAction int

const (
	// ignore: accept, drop and list in Notes.Ignored.
	ignore ruleAction = iota
	// rename: move the value to the field named by to (same object); when
	// that field is also present it wins and the old one is ignored.
	rename
	// refuseIf: refuse when refused(value) is true, otherwise ignore.
	refuseIf
)

// fieldRule is the treatment of one DM field name within one Go type.
type fieldRule struct {
	action ruleAction
	to     string           // rename: the current field name
	refuse func(v any) bool // refuseIf: whether this value is refused
	why    string           // refuseIf: what the operator can do
	secret bool             // refuseIf: never show the value
}

// decodeInto reads data (YAML or JSON) into c, which holds the defaults,
// walking it with the rules of c's type, and returns the notes. Fields that
// could not be taken (unknown in Strict mode, refused in both) come back as
// a *DecodeError while the rest is still decoded into c, so that a caller
// can report them together with the validation problems of the rest; err
// is any other failure (syntax, a value of the wrong type), after which c
// is not usable.
func decodeInto(what string, data []byte, c any, mode DecodeMode) (notes DecodeNotes, fields *DecodeError, err error) {
	// JSON is read as JSON (YAML's reading of JSON differs in corners such
	// as escapes); anything else as YAML, duplicate keys refused.
	js := data
	if !json.Valid(data) {
		var err error
		if js, err = yaml.YAMLToJSONStrict(data); err != nil {
			return notes, nil, fmt.Errorf("config: decode %s: %w", what, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return notes, nil, fmt.Errorf("config: decode %s: %w", what, err)
	}
	if tree == nil {
		// An empty document: nothing to decode, every default stays.
		return notes, nil, nil
	}
	w := walker{}
	tree = w.walk("", tree, reflect.TypeOf(c))
	slices.Sort(w.unknown)
	slices.Sort(w.ignored)
	slices.Sort(w.renamed)
	notes = DecodeNotes{Ignored: w.ignored, Renamed: w.renamed}
	de := &DecodeError{What: what, Refused: w.refused}
	if mode == Strict {
		de.Unknown = w.unknown
	} else {
		notes.Unknown = w.unknown
	}
	if len(de.Unknown) == 0 && len(de.Refused) == 0 {
		de = nil
	}
	clean, err := json.Marshal(tree)
	if err != nil {
		return notes, de, fmt.Errorf("config: decode %s: %w", what, err)
	}
	dec = json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields() // the walk removed every field the type lacks
	if err := dec.Decode(c); err != nil {
		err = fmt.Errorf("config: decode %s: %w", what, err)
		if de != nil {
			err = errors.Join(de, err)
		}
		return notes, de, err
	}
	return notes, de, nil
}

// walker classifies the fields of one input.
type walker struct {
	unknown, ignored, renamed []string
	refused                   []FieldError
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walk returns v with the fields t does not have removed or renamed,
// recording each under its path.
func (w *walker) walk(path string, v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return v // a leaf with its own syntax (Duration, ByteSize)
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return v // a type error, reported by the final decode
		}
		return w.walkStruct(path, obj, t)
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			obj[k] = w.walk(join(path, k), obj[k], t.Elem())
		}
		return obj
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return v
		}
		for i := range list {
			list[i] = w.walk(index(path, i), list[i], t.Elem())
		}
		return list
	case reflect.String:
		// As yaml.v2 (DM's decoder) does, a scalar read into a string
		// field is its text: session: {foreign_key_checks: 0}.
		switch x := v.(type) {
		case json.Number:
			return x.String()
		case bool:
			return fmt.Sprint(x)
		}
	}
	return v
}

func (w *walker) walkStruct(path string, obj map[string]any, t reflect.Type) map[string]any {
	fields := jsonFields(t)
	rules := dmFieldRules[t]
	out := make(map[string]any, len(obj))
	// Known fields first, so that a rename can see whether its target is set.
	var rest []string
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		name, ft, ok := fields.lookup(k)
		if !ok {
			rest = append(rest, k)
			continue
		}
		out[name] = w.walk(join(path, name), obj[k], ft)
	}
	for _, k := range rest {
		at := join(path, k)
		rule, ok := lookupRule(rules, k)
		if !ok {
			w.unknown = append(w.unknown, at)
			continue
		}
		switch rule.action {
		case rename:
			if _, set := out[rule.to]; set {
				w.ignored = append(w.ignored, at) // the current name wins, as in DM
				continue
			}
			_, ft, _ := fields.lookup(rule.to)
			out[rule.to] = w.walk(join(path, rule.to), obj[k], ft)
			w.renamed = append(w.renamed, at+" → "+join(path, rule.to))
		case refuseIf:
			if rule.refuse(obj[k]) {
				shown := "set"
				if !rule.secret {
					shown = showValue(obj[k])
				}
				w.refused = append(w.refused, FieldError{Field: at, Value: shown, Problem: rule.why})
				continue
			}
			w.ignored = append(w.ignored, at)
		default:
			w.ignored = append(w.ignored, at)
		}
	}
	return out
}

// lookupRule finds the rule of a DM field, exactly or case-insensitively
// (as encoding/json matches field names).
func lookupRule(rules map[string]fieldRule, k string) (fieldRule, bool) {
	if r, ok := rules[k]; ok {
		return r, true
	}
	for name, r := range rules {
		if strings.EqualFold(name, k) {
			return r, true
		}
	}
	return fieldRule{}, false
}

// showValue renders a refused scalar value for an error message.
func showValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool, json.Number:
		return fmt.Sprint(x)
	case nil:
		return "null"
	case []any:
		return fmt.Sprintf("[%d entries]", len(x))
	case map[string]any:
		return fmt.Sprintf("{%d entries}", len(x))
	}
	return "set"
}

// structFields maps the json names of a struct type's fields (embedded
// structs flattened) to their types.
type structFields map[string]reflect.Type

// lookup finds a field by its json name, exactly or case-insensitively, and
// returns its canonical name.
func (f structFields) lookup(k string) (string, reflect.Type, bool) {
	if t, ok := f[k]; ok {
		return k, t, true
	}
	for name, t := range f {
		if strings.EqualFold(name, k) {
			return name, t, true
		}
	}
	return "", nil, false
}

var fieldCache sync.Map // reflect.Type → structFields

func jsonFields(t reflect.Type) structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(structFields)
	}
	f := structFields{}
	collectFields(t, f)
	fieldCache.Store(t, f)
	return f
}

func collectFields(t reflect.Type, into structFields) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(ft, into)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		into[name] = sf.Type
	}
}
