package secret

import (
	"errors"
	"strings"
	"testing"
)

// mustKey is testKey for fuzz targets.
func mustKey(tb testing.TB, hexKey string) *Key {
	tb.Helper()
	k, err := ParseKey([]byte(hexKey), "/etc/dm/test.key")
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

const otherKeyHex = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100"

// FuzzResolvePassword classifies fuzzed stored passwords with and without a
// key. Properties: never a panic; an error wraps ErrUndecryptable and shows
// neither the stored value nor key material; a plaintext comes back as
// written; a decryption is text (what a typed password is).
func FuzzResolvePassword(f *testing.F) {
	k := mustKey(f, testKeyHex)
	ours, err := Encrypt(k, "pa:ss@w/rd")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "root", "secret", ours, ours[:len(ours)-4], "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"QUJDREVGR0hJSktMTU5PUEBhYmM=", "QUJDREVGR0hJSktMTU5PUEA=", "QUJDREVGR0hJSktMTU5PUA==", "=====", "a b c d e f g h i j k l m n o p q r s",
		"MDEyMzQ1Njc4OWFiY2RlZkB4eXo", "MDEyMzQ1Njc4OWFiY2RlZkB4eXo=\n", "b3BlbnNzbCByYW5kIC1iYXNlNjQgMzIgZ2l2ZXMgdGhpcw=="} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, stored string, withKey bool) {
		var key *Key
		if withKey {
			key = k
		}
		pw, kind, err := Classify(stored, key)
		if err != nil {
			if !errors.Is(err, ErrUndecryptable) {
				t.Fatalf("error %v does not wrap ErrUndecryptable", err)
			}
			msg := err.Error()
			if len(stored) >= 8 && strings.Contains(msg, stored) {
				t.Fatalf("error shows the stored value: %v", err)
			}
			if strings.Contains(msg, testKeyHex[:16]) || strings.Contains(msg, dmDefaultKeyHex[:16]) {
				t.Fatalf("error shows key material: %v", err)
			}
			return
		}
		switch kind {
		case Plaintext:
			if pw != stored {
				t.Fatalf("plaintext %q resolved to %q", stored, pw)
			}
		case Ours:
			if !withKey {
				t.Fatalf("%q decrypted as ours without a key", stored)
			}
		default:
			if !isText(pw) {
				t.Fatalf("%q (%v) decrypted to %q, not text", stored, kind, pw)
			}
		}
		if got, err := ResolvePassword(stored, key); err != nil || got != pw {
			t.Fatalf("ResolvePassword(%q) = %q, %v; Classify gave %q", stored, got, err, pw)
		}
	})
}

// FuzzEncryptDecrypt encrypts fuzzed passwords. Properties: the ciphertext
// decrypts and resolves to the password with the key; with another key it
// is a clear error that shows neither the password nor the ciphertext; it
// never contains the password.
func FuzzEncryptDecrypt(f *testing.F) {
	for _, s := range []string{"", "root", "pa:ss@w/rd", "пароль", "\x00\xff", strings.Repeat("x", 1000), "we'ird\"pass\\word"} {
		f.Add(s)
	}
	k := mustKey(f, testKeyHex)
	other := mustKey(f, otherKeyHex)
	f.Fuzz(func(t *testing.T, pw string) {
		ct, err := Encrypt(k, pw)
		if err != nil {
			t.Fatal(err)
		}
		if len(pw) >= 4 && strings.Contains(ct, pw) {
			t.Fatalf("ciphertext %q contains the password %q", ct, pw)
		}
		if got, err := Decrypt(k, ct); err != nil || got != pw {
			t.Fatalf("Decrypt = %q, %v; want %q", got, err, pw)
		}
		if got, kind, err := Classify(ct, k); err != nil || got != pw || kind != Ours {
			t.Fatalf("Classify = %q, %v, %v; want %q, ours", got, kind, err, pw)
		}
		_, err = Decrypt(other, ct)
		if !errors.Is(err, ErrUndecryptable) {
			t.Fatalf("Decrypt with another key: %v", err)
		}
		_, _, cerr := Classify(ct, other)
		// The same errors for another password: their fixed text may hold
		// a short password by chance.
		refCT, _ := Encrypt(k, "x")
		_, refErr := Decrypt(other, refCT)
		_, _, refCErr := Classify(refCT, other)
		for i, e := range []error{err, cerr} {
			if e == nil {
				continue
			}
			ref := []error{refErr, refCErr}[i]
			inTemplate := ref != nil && strings.Contains(ref.Error(), pw)
			if strings.Contains(e.Error(), ct) || (len(pw) >= 4 && !inTemplate && strings.Contains(e.Error(), pw)) {
				t.Fatalf("error shows the ciphertext or the password: %v", e)
			}
		}
	})
}

// FuzzParseKey parses fuzzed key files. Properties: never a panic; an error
// wraps ErrKeyFile, names the file and shows no run of 16 hex characters
// of the content (key material); a key that parses encrypts and decrypts.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{testKeyHex, testKeyHex + "\n", testKeyHex + "\r\n", testKeyHex[:63], testKeyHex + "0", strings.ToUpper(testKeyHex),
		testKeyHex[:62] + "zz", " " + testKeyHex, testKeyHex + "\n\n", "", "\n"} {
		f.Add([]byte(s))
	}
	const path = "/etc/dm/fuzz.key"
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKey(data, path)
		if err != nil {
			if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v does not wrap ErrKeyFile or name the file", err)
			}
			s := string(data)
			for i := 0; i+16 <= len(s); i++ {
				if w := s[i : i+16]; strings.Trim(w, "0123456789abcdefABCDEF") == "" && strings.Contains(err.Error(), w) {
					t.Fatalf("error shows key material %q: %v", w, err)
				}
			}
			return
		}
		ct, err := Encrypt(k, "pw")
		if err != nil {
			t.Fatal(err)
		}
		if pt, err := Decrypt(k, ct); err != nil || pt != "pw" {
			t.Fatalf("a parsed key does not round-trip: %q, %v", pt, err)
		}
		if strings.Contains(k.String(), strings.TrimSpace(string(data))) {
			t.Fatalf("Key.String shows the key: %s", k)
		}
	})
}
