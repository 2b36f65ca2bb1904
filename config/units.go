package config

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("10s", "5m",
// "1h30m") in YAML, JSON and TOML. It marshals as time.Duration.String()
// ("10s", "5m0s"), which reads back to the same value. It also implements
// flag.Value, so a flag can set it directly.
type Duration struct {
	time.Duration
}

// ParseDuration parses a Go duration string such as "10s" or "5m".
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return Duration{}, fmt.Errorf("invalid duration %q: want a Go duration such as \"10s\", \"5m\" or \"1h30m\"", clip(s))
	}
	return Duration{d}, nil
}

// MarshalText writes the duration as a Go duration string (TOML, flags).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// UnmarshalText reads a Go duration string (TOML, flags).
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the duration as a JSON string such as "10s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON reads a JSON string holding a Go duration. JSON null leaves
// the value unchanged. A number is rejected: "10" is ambiguous.
func (d *Duration) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		// An UnmarshalTypeError gets the field path added by encoding/json.
		return &json.UnmarshalTypeError{
			Value: clip(string(data)) + ` (want a Go duration string such as "10s")`,
			Type:  reflect.TypeFor[Duration](),
		}
	}
	v, err := ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{
			Value: strconv.Quote(clip(s)) + ` (want a Go duration string such as "10s", "5m" or "1h30m")`,
			Type:  reflect.TypeFor[Duration](),
		}
	}
	*d = v
	return nil
}

// Set parses a Go duration string; with String it makes *Duration a flag.Value.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// ByteSize is a size in bytes. It reads a plain number of bytes (JSON/TOML
// number or string "100") or a number with a unit: B; KB, MB, GB, TB, PB
// (powers of 1000); KiB, MiB, GiB, TiB, PiB (powers of 1024). Units are
// case-insensitive, a space may separate them from the number, and the
// number may have a fraction as long as the result is a whole number of
// bytes ("1.5GiB"). It always marshals as a plain number of bytes (a JSON
// number, decimal digits in TOML); String gives the short human form
// ("64MiB").
type ByteSize int64

var byteSizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)

var byteUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
	"tb":  1000 * 1000 * 1000 * 1000,
	"pb":  1000 * 1000 * 1000 * 1000 * 1000,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"pib": 1 << 50,
}

// ParseByteSize parses "64MiB", "1GB", "512KiB", "100" or "1.5GiB".
func ParseByteSize(s string) (ByteSize, error) {
	bad := func(why string) (ByteSize, error) {
		return 0, fmt.Errorf("invalid size %q: %s", clip(s), why)
	}
	m := byteSizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return bad(`want a number of bytes with an optional unit, such as "100", "512KiB", "64MiB", "1.5GiB" or "1GB"`)
	}
	unit, ok := byteUnits[strings.ToLower(m[2])]
	if !ok {
		return bad("unknown unit " + strconv.Quote(clip(m[2])) + "; use B, KB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB, TiB, PiB (powers of 1024)")
	}
	n, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return bad("not a number")
	}
	n.Mul(n, new(big.Rat).SetInt64(unit))
	if !n.IsInt() {
		return bad("not a whole number of bytes")
	}
	if !n.Num().IsInt64() {
		return bad("too large")
	}
	return ByteSize(n.Num().Int64()), nil
}

// String gives the size in the largest binary unit that divides it exactly
// ("64MiB", "1536KiB", "100B"); ParseByteSize reads it back.
func (b ByteSize) String() string {
	units := []struct {
		name string
		size int64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if b != 0 && int64(b)%u.size == 0 {
			return strconv.FormatInt(int64(b)/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalText writes the plain number of bytes (TOML, flags).
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }

// UnmarshalText reads a size with an optional unit (TOML, flags).
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalJSON writes the plain number of bytes as a JSON number.
func (b ByteSize) MarshalJSON() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }

// UnmarshalJSON reads a JSON number of bytes or a JSON string with a unit.
// JSON null leaves the value unchanged.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	text := string(data)
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &text); err != nil {
			return err
		}
	}
	v, err := ParseByteSize(text)
	if err != nil {
		return &json.UnmarshalTypeError{
			Value: strconv.Quote(clip(text)) + ` (want a size such as 1048576, "512KiB", "64MiB" or "1GB")`,
			Type:  reflect.TypeFor[ByteSize](),
		}
	}
	*b = v
	return nil
}

// Set parses a size; with String it makes *ByteSize a flag.Value.
func (b *ByteSize) Set(s string) error { return b.UnmarshalText([]byte(s)) }
