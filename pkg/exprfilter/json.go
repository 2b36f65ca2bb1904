package exprfilter

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// jsonStep is one step of a JSON path: a member name or an array index.
type jsonStep struct {
	key   string
	index int
	isKey bool
}

// parseJSONPath reads a path of the form $, $.key, $."quoted key", $[n],
// chained. Wildcards (*, **) and ranges are not supported.
func parseJSONPath(p string) ([]jsonStep, error) {
	s := strings.TrimSpace(p)
	if !strings.HasPrefix(s, "$") {
		return nil, fmt.Errorf("JSON path %q must start with $", p)
	}
	s = s[1:]
	var steps []jsonStep
	for len(s) > 0 {
		switch s[0] {
		case ' ':
			s = s[1:]
		case '.':
			s = s[1:]
			if strings.HasPrefix(s, "\"") {
				end := 1
				for end < len(s) && s[end] != '"' {
					if s[end] == '\\' {
						end++
					}
					end++
				}
				if end >= len(s) {
					return nil, fmt.Errorf("JSON path %q: unterminated quoted member", p)
				}
				key, err := strconv.Unquote(s[:end+1])
				if err != nil {
					return nil, fmt.Errorf("JSON path %q: %v", p, err)
				}
				steps = append(steps, jsonStep{key: key, isKey: true})
				s = s[end+1:]
				continue
			}
			end := 0
			for end < len(s) && s[end] != '.' && s[end] != '[' && s[end] != ' ' {
				end++
			}
			key := s[:end]
			if key == "" || strings.Contains(key, "*") {
				return nil, fmt.Errorf("JSON path %q: wildcards and empty members are not supported", p)
			}
			steps = append(steps, jsonStep{key: key, isKey: true})
			s = s[end:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("JSON path %q: unterminated [", p)
			}
			n, err := strconv.Atoi(strings.TrimSpace(s[1:end]))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("JSON path %q: only [n] array steps are supported", p)
			}
			steps = append(steps, jsonStep{index: n})
			s = s[end+1:]
		default:
			return nil, fmt.Errorf("JSON path %q: unexpected %q", p, s[0])
		}
	}
	return steps, nil
}

func jsonExtract(args []node) (node, error) {
	paths := make([][]jsonStep, len(args)-1)
	for i, a := range args[1:] {
		lit, ok := constString(a)
		if !ok {
			return node{}, fmt.Errorf("JSON_EXTRACT takes constant string paths")
		}
		steps, err := parseJSONPath(lit)
		if err != nil {
			return node{}, err
		}
		paths[i] = steps
	}
	// utf8mb4_bin at a column's derivation: against a text column it
	// compares bytewise (JSON_UNQUOTE's result is weaker, see there)
	t := typ{k: kStr, coll: binaryCollJSON, coer: coerImplicit, json: true}
	f := args[0].f
	return node{t: t, f: func(row []any) (val, error) {
		v, err := f(row)
		if err != nil || v.k == kNull {
			return nullVal, err
		}
		doc := v.toStr()
		if !json.Valid([]byte(doc)) {
			return nullVal, nil
		}
		if len(paths) == 1 {
			raw, ok := jsonLookup(doc, paths[0])
			if !ok {
				return nullVal, nil
			}
			return strVal(raw, t.coll), nil
		}
		var b strings.Builder
		found := 0
		b.WriteByte('[')
		for _, p := range paths {
			raw, ok := jsonLookup(doc, p)
			if !ok {
				continue
			}
			if found > 0 {
				b.WriteString(", ")
			}
			b.WriteString(raw)
			found++
		}
		if found == 0 {
			return nullVal, nil
		}
		b.WriteByte(']')
		return strVal(b.String(), t.coll), nil
	}}, nil
}

// binaryCollJSON is the collation of JSON_EXTRACT's result: utf8mb4_bin.
var binaryCollJSON = &collation{name: "utf8mb4_bin", binary: true, pad: true}

func constString(n node) (string, bool) {
	if n.t.k != kStr {
		return "", false
	}
	defer func() { _ = recover() }()
	v, err := n.f(nil)
	if err != nil || v.k != kStr {
		return "", false
	}
	return v.s, true
}

// jsonLookup finds the value at path in a valid JSON document and
// returns its text as written.
func jsonLookup(doc string, path []jsonStep) (string, bool) {
	s := doc
	for _, st := range path {
		s = strings.TrimLeft(s, " \t\r\n")
		if st.isKey {
			if !strings.HasPrefix(s, "{") {
				return "", false
			}
			var found bool
			s, found = jsonMember(s, st.key)
			if !found {
				return "", false
			}
		} else {
			if !strings.HasPrefix(s, "[") {
				if st.index == 0 {
					continue // a scalar is its own [0]
				}
				return "", false
			}
			var found bool
			s, found = jsonElement(s, st.index)
			if !found {
				return "", false
			}
		}
	}
	s = strings.TrimLeft(s, " \t\r\n")
	n := jsonValueLen(s)
	return s[:n], true
}

// jsonValueLen is the length of the JSON value at the start of s.
func jsonValueLen(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] {
	case '"':
		i := 1
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case '"':
				return i + 1
			}
			i++
		}
		return len(s)
	case '{', '[':
		depth := 0
		i := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i += jsonValueLen(s[i:])
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(s)
	}
	i := 0
	for i < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[i])) {
		i++
	}
	return i
}

// jsonMember returns the text from the value of member key of the object
// at the start of s (the first one when a key repeats).
func jsonMember(s, key string) (string, bool) {
	i := 1
	var out string
	found := false
	for {
		for i < len(s) && strings.ContainsRune(" \t\r\n,", rune(s[i])) {
			i++
		}
		if i >= len(s) || s[i] == '}' {
			return out, found
		}
		kl := jsonValueLen(s[i:])
		k, ok := jsonUnquote(s[i : i+kl])
		i += kl
		for i < len(s) && (s[i] == ' ' || s[i] == ':' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
		if ok && k == key {
			out, found = s[i:], true
			return out, found
		}
		i += jsonValueLen(s[i:])
	}
}

func jsonElement(s string, index int) (string, bool) {
	i := 1
	for n := 0; ; n++ {
		for i < len(s) && strings.ContainsRune(" \t\r\n", rune(s[i])) {
			i++
		}
		if i >= len(s) || s[i] == ']' {
			return "", false
		}
		if n == index {
			return s[i:], true
		}
		i += jsonValueLen(s[i:])
		for i < len(s) && strings.ContainsRune(" \t\r\n", rune(s[i])) {
			i++
		}
		if i < len(s) && s[i] == ',' {
			i++
		}
	}
}

// jsonUnquote decodes a JSON string literal ("..."); false when s is none.
func jsonUnquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	if !strings.ContainsRune(s, '\\') {
		return s[1 : len(s)-1], true
	}
	var out string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return "", false
	}
	return out, true
}
