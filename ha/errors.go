package ha

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Sentinel errors, matched with errors.Is. Invalid names in keys or values
// also match config.ErrInvalidName.
var (
	// ErrMalformed marks a value that does not decode or breaks the contract
	// of DESIGN.md §3 (unknown stage, names that disagree with the key).
	ErrMalformed = errors.New("ha: malformed value")
	// ErrBadKey marks a key that is not of the expected kind or shape.
	ErrBadKey = errors.New("ha: bad key")
)

// KeyError is the error of one key: its value (or the key itself) is
// malformed. Other keys read alongside it are unaffected.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("ha: key %s: %v", e.Key, e.Err) }

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }

// KeyErrors is returned, alongside a map of every well-formed entry, by the
// Get* functions that return a map, when some keys are malformed. Callers
// that can live without the bad entries report it and go on:
//
//	var ke *ha.KeyErrors
//	if errors.As(err, &ke) { log(ke); err = nil }
type KeyErrors struct {
	Errors []*KeyError // sorted by key
}

func (e *KeyErrors) Error() string {
	parts := make([]string, len(e.Errors))
	for i, ke := range e.Errors {
		parts[i] = ke.Error()
	}
	return fmt.Sprintf("ha: %d malformed key(s): %s", len(e.Errors), strings.Join(parts, "; "))
}

// Unwrap returns every key's error, so errors.Is sees the causes.
func (e *KeyErrors) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, ke := range e.Errors {
		out[i] = ke
	}
	return out
}

// keyErrors collects per-key errors while reading a range.
type keyErrors []*KeyError

func (ks *keyErrors) add(key string, err error) {
	*ks = append(*ks, &KeyError{Key: key, Err: err})
}

// err returns nil, or a *KeyErrors sorted by key.
func (ks keyErrors) err() error {
	if len(ks) == 0 {
		return nil
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Key < ks[j].Key })
	return &KeyErrors{Errors: ks}
}

func malformed(what, key string, err error) error {
	return fmt.Errorf("%w: %s at %s: %w", ErrMalformed, what, key, err)
}
