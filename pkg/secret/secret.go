// Package secret owns the encryption of passwords stored in source and task
// configs (DESIGN §4a): the key file given by --secret-key-path, the
// ciphertext `dmctl encrypt` prints, the decryption of DM's own `dmctl
// encrypt` output, and the rule that tells a stored password's kind.
//
// Stored passwords are classified by ResolvePassword, in this order:
//
//  1. A value that is not strict standard base64 (with padding, no spaces), or
//     decodes to fewer than 17 bytes, is plaintext.
//  2. With a key: a value decoding to at least 28 bytes (12-byte nonce +
//     16-byte tag) that AES-256-GCM opens with the key is our ciphertext.
//  3. A value whose decoded byte 16 is '@' has the shape of DM's ciphertext
//     (16-byte IV, '@', AES-256-CFB). It is decrypted with the configured key
//     (DM v8 custom keys have our key file format) and with DM's published
//     default key; the key under which it decrypts to text (valid UTF-8 without
//     control characters) wins. None, or both with different text: an error.
//  4. With a key: any other value of at least 28 decoded bytes has our
//     ciphertext's shape but did not authenticate: an error (never a login
//     attempt with garbage). A plaintext password of that shape (such as
//     `openssl rand -base64 32`) is stored encrypted instead.
//  5. Anything else is plaintext. Without a key, a value of our ciphertext's
//     shape cannot be told from a plaintext password and is used as written.
//
// The package never logs, and its errors never contain a password, a
// ciphertext or key material: only the key file's path.
package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// KeySize is the size of an AES-256 key in bytes (64 hex characters in a key file).
	KeySize = 32
	// KeyFileMode is the mode GenerateKeyFile creates key files with; LoadKeyFile
	// refuses any file whose mode grants group or others anything.
	KeyFileMode fs.FileMode = 0o600

	gcmNonceSize = 12
	gcmTagSize   = 16
	// minOurs is the decoded length of our ciphertext of an empty password.
	minOurs = gcmNonceSize + gcmTagSize

	dmIVSize = aes.BlockSize
	dmSep    = '@'
	// minDM is the decoded length of DM's ciphertext of an empty password.
	minDM = dmIVSize + 1
)

// dmDefaultKey is the fixed AES-256 key DM (before v8.0.0) used for `dmctl
// encrypt`; it is published in pingcap/tiflow dm/pkg/encrypt/encrypt.go.
// It protects nothing: it only lets us read the passwords in DM's files.
var dmDefaultKey = mustHex("a529b7665997f043a30ac8fadcb51d6aa032c226ab5b7750530b12b8c1a16a48")

// Errors callers may test with errors.Is. The returned errors wrap them with
// the key file and the operator's fix.
var (
	// ErrKeyFile: the key file cannot be used (missing, bad content, open mode).
	ErrKeyFile = errors.New("secret: key file unusable")
	// ErrUndecryptable: a stored password looks encrypted but cannot be decrypted.
	ErrUndecryptable = errors.New("secret: password looks encrypted but cannot be decrypted")
)

// Key is a loaded AES-256 key. Its String and GoString never show key material.
type Key struct {
	path string // where it was loaded from, for error texts; "" for NewKey
	raw  [KeySize]byte
	aead cipher.AEAD
}

// NewKey makes a Key from 32 raw bytes; path is only used in error texts.
func NewKey(raw []byte, path string) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%w: want a %d-byte AES-256 key, got %d bytes", ErrKeyFile, KeySize, len(raw))
	}
	k := &Key{path: path}
	copy(k.raw[:], raw)
	block, err := aes.NewCipher(k.raw[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyFile, err)
	}
	if k.aead, err = cipher.NewGCM(block); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyFile, err)
	}
	return k, nil
}

// Path is the file the key was loaded from ("" when made by NewKey).
func (k *Key) Path() string { return k.path }

// String names the key by its file only.
func (k *Key) String() string {
	if k == nil {
		return "secret.Key(none)"
	}
	return fmt.Sprintf("secret.Key(%s)", k.source())
}

// GoString keeps %#v from printing the key bytes.
func (k *Key) GoString() string { return k.String() }

// source names the key for error texts.
func (k *Key) source() string {
	if k.path == "" {
		return "the configured key"
	}
	return "--secret-key-path " + k.path
}

// LoadKeyFile reads a key file: exactly 64 hex characters, optionally followed
// by one newline. It refuses a file that group or others may read or write
// (mode & 0o077 != 0), naming the file and the fix. Errors never contain the
// file's content.
func LoadKeyFile(path string) (*Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: secret key file %s: %v", ErrKeyFile, path, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: secret key file %s is not a regular file", ErrKeyFile, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: secret key file %s has mode %04o: group and others must have no access; run `chmod 600 %s`",
			ErrKeyFile, path, perm, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read secret key file %s: %v", ErrKeyFile, path, errors.Unwrap(err))
	}
	return ParseKey(data, path)
}

// ParseKey parses a key file's content (64 hex characters, optionally one
// trailing "\n" or "\r\n"); path is used in error texts only.
func ParseKey(data []byte, path string) (*Key, error) {
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if len(s) != 2*KeySize {
		return nil, fmt.Errorf("%w: secret key file %s must hold exactly %d hex characters (an AES-256 key, e.g. from `openssl rand -hex 32`), it holds %d characters",
			ErrKeyFile, path, 2*KeySize, len(s))
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: secret key file %s must hold only hex characters 0-9a-f (an AES-256 key, e.g. from `openssl rand -hex 32`)", ErrKeyFile, path)
	}
	return NewKey(raw, path)
}

// GenerateKeyFile writes a fresh random key to path with mode 0600; it fails
// if path exists, so it never replaces the key existing ciphertexts need.
func GenerateKeyFile(path string) (*Key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("%w: generate key: %v", ErrKeyFile, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, KeyFileMode)
	if err != nil {
		return nil, fmt.Errorf("%w: create secret key file %s: %v (an existing key file is never overwritten)", ErrKeyFile, path, errors.Unwrap(err))
	}
	// The umask cannot widen 0600, but an inherited ACL default could: make sure.
	if err := f.Chmod(KeyFileMode); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: chmod secret key file %s: %v", ErrKeyFile, path, err)
	}
	if _, err := f.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: write secret key file %s: %v", ErrKeyFile, path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: sync secret key file %s: %v", ErrKeyFile, path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("%w: close secret key file %s: %v", ErrKeyFile, path, err)
	}
	return NewKey(raw, path)
}

// Encrypt returns base64(nonce || AES-256-GCM(plaintext)), standard encoding
// with padding: what `dmctl encrypt` prints.
func Encrypt(key *Key, plaintext string) (string, error) {
	if key == nil {
		return "", fmt.Errorf("%w: no key: give --secret-key-path", ErrKeyFile)
	}
	nonce := make([]byte, gcmNonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secret: generate nonce: %w", err)
	}
	sealed := key.aead.Seal(nonce, nonce, []byte(plaintext), nil)
	return base64.StdEncoding.EncodeToString(sealed), nil
}

// Decrypt opens our ciphertext (what Encrypt returns). It fails with
// ErrUndecryptable when the value is not such a ciphertext under key.
func Decrypt(key *Key, ciphertext string) (string, error) {
	if key == nil {
		return "", fmt.Errorf("%w: no key: give --secret-key-path", ErrUndecryptable)
	}
	raw, ok := decodeB64(ciphertext)
	if !ok || len(raw) < minOurs {
		return "", fmt.Errorf("%w: not a ciphertext of `dmctl encrypt` (base64 of at least %d bytes)", ErrUndecryptable, minOurs)
	}
	pt, ok := openOurs(key, raw)
	if !ok {
		return "", fmt.Errorf("%w with the key in %s", ErrUndecryptable, key.source())
	}
	return pt, nil
}

// Kind says how ResolvePassword read a stored password.
type Kind int

const (
	// Plaintext: used as written.
	Plaintext Kind = iota
	// Ours: AES-256-GCM ciphertext of our `dmctl encrypt`.
	Ours
	// DMDefaultKey: DM's ciphertext under DM's published default key.
	DMDefaultKey
	// DMConfiguredKey: DM's ciphertext (DM v8 custom key) under the configured key.
	DMConfiguredKey
)

func (k Kind) String() string {
	switch k {
	case Plaintext:
		return "plaintext"
	case Ours:
		return "dmctl-encrypt"
	case DMDefaultKey:
		return "dm-encrypt-default-key"
	case DMConfiguredKey:
		return "dm-encrypt-configured-key"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// ResolvePassword returns the password to log in with for a stored value:
// the value itself when it is plaintext, its decryption when it is a
// ciphertext (see the package comment for the rule). key may be nil (no
// --secret-key-path). Errors wrap ErrUndecryptable, say what to do, and
// never contain the stored value; callers prefix the object they belong to
// ("password of source s1: ...").
func ResolvePassword(stored string, key *Key) (string, error) {
	pw, _, err := Classify(stored, key)
	return pw, err
}

// Classify is ResolvePassword that also says which kind the value was.
func Classify(stored string, key *Key) (string, Kind, error) {
	raw, ok := decodeB64(stored)
	if !ok || len(raw) < minDM {
		return stored, Plaintext, nil
	}
	if key != nil && len(raw) >= minOurs {
		if pt, ok := openOurs(key, raw); ok {
			return pt, Ours, nil
		}
	}
	if raw[dmIVSize] == dmSep {
		return resolveDM(raw, key)
	}
	if key != nil && len(raw) >= minOurs {
		return "", Plaintext, fmt.Errorf("%w: it has the form of a `dmctl encrypt` ciphertext (base64 of nonce+AES-256-GCM) but does not authenticate with the key in %s; "+
			"re-encrypt the password with `dmctl encrypt --secret-key-path %s`, or start with the key it was encrypted with; "+
			"a plaintext password of this form must be stored encrypted",
			ErrUndecryptable, key.source(), key.pathOr("FILE"))
	}
	return stored, Plaintext, nil
}

// pathOr is the key's path or def when it has none.
func (k *Key) pathOr(def string) string {
	if k.path == "" {
		return def
	}
	return k.path
}

// resolveDM decrypts a value of DM's ciphertext shape with the configured
// key and DM's default key, keeping the one that yields text.
func resolveDM(raw []byte, key *Key) (string, Kind, error) {
	var (
		found []string
		kinds []Kind
	)
	if key != nil {
		if pt := decryptDM(key.raw[:], raw); isText(pt) {
			found, kinds = append(found, pt), append(kinds, DMConfiguredKey)
		}
	}
	if pt := decryptDM(dmDefaultKey, raw); isText(pt) {
		found, kinds = append(found, pt), append(kinds, DMDefaultKey)
	}
	switch {
	case len(found) == 1 || (len(found) == 2 && found[0] == found[1]):
		return found[0], kinds[0], nil
	case len(found) == 2:
		return "", Plaintext, fmt.Errorf("%w: it has the form of DM's `dmctl encrypt` output and decrypts to text under both DM's default key and the key in %s, so it is ambiguous; "+
			"re-encrypt the plaintext password with `dmctl encrypt --secret-key-path %s`",
			ErrUndecryptable, key.source(), key.pathOr("FILE"))
	}
	with := "DM's default key"
	fix := "give the DM secret key file it was encrypted with as --secret-key-path (DM's secret-key-path file has the same format)"
	if key != nil {
		with = "DM's default key or the key in " + key.source()
		fix = "start with the DM secret key file it was encrypted with as --secret-key-path"
	}
	return "", Plaintext, fmt.Errorf("%w: it has the form of DM's `dmctl encrypt` output (base64 of 16-byte IV, '@', AES-256-CFB) but does not decrypt to text with %s; "+
		"%s, or store it re-encrypted with this project's `dmctl encrypt` (a plaintext password of this form must be stored encrypted)",
		ErrUndecryptable, with, fix)
}

// openOurs opens nonce||GCM-ciphertext.
func openOurs(key *Key, raw []byte) (string, bool) {
	pt, err := key.aead.Open(nil, raw[:gcmNonceSize], raw[gcmNonceSize:], nil)
	if err != nil {
		return "", false
	}
	return string(pt), true
}

// decryptDM decrypts DM's iv||'@'||CFB-ciphertext with key (CFB carries no
// authentication: any key "decrypts"; the caller judges the text).
func decryptDM(key, raw []byte) string {
	block, err := aes.NewCipher(key)
	if err != nil {
		return ""
	}
	iv := raw[:dmIVSize]
	ct := raw[dmIVSize+1:]
	pt := make([]byte, len(ct))
	cipher.NewCFBDecrypter(block, iv).XORKeyStream(pt, ct) // DM's published scheme is CFB (deprecated in crypto/cipher); we only read it
	return string(pt)
}

// isText reports whether s is valid UTF-8 without control characters: what
// a password typed into a config file is, and what a wrong key's output
// almost never is.
func isText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// decodeB64 decodes strict standard base64 with padding; values containing
// whitespace (which the decoder would skip) are not ciphertexts.
func decodeB64(s string) ([]byte, bool) {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return nil, false
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, false
	}
	return raw, true
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != KeySize {
		panic("secret: bad built-in key")
	}
	return b
}

// Equal reports whether two keys hold the same bytes (for config change checks).
func (k *Key) Equal(o *Key) bool {
	if k == nil || o == nil {
		return k == o
	}
	return bytes.Equal(k.raw[:], o.raw[:])
}
