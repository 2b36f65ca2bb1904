package secret

import (
	"crypto/aes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func testKey(t *testing.T, hexKey string) *Key {
	t.Helper()
	k, err := ParseKey([]byte(hexKey), "/etc/dm/test.key")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// dmEncrypt is an independent implementation of DM's `dmctl encrypt`
// scheme (base64(iv || '@' || AES-256-CFB128(plaintext))), written from the
// CFB definition with the block cipher only, so the package's decryption is
// checked against something other than itself.
func dmEncrypt(t *testing.T, keyHex string, iv []byte, plaintext string) string {
	t.Helper()
	key, err := hex.DecodeString(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte{}, iv...), '@')
	prev := append([]byte{}, iv...)
	ks := make([]byte, aes.BlockSize)
	p := []byte(plaintext)
	for off := 0; off < len(p); off += aes.BlockSize {
		block.Encrypt(ks, prev)
		end := min(off+aes.BlockSize, len(p))
		c := make([]byte, aes.BlockSize)
		for i := off; i < end; i++ {
			c[i-off] = p[i] ^ ks[i-off]
		}
		out = append(out, c[:end-off]...)
		copy(prev, c) // full block feeds back; a short last block ends the stream
	}
	return base64.StdEncoding.EncodeToString(out)
}

const dmDefaultKeyHex = "a529b7665997f043a30ac8fadcb51d6aa032c226ab5b7750530b12b8c1a16a48"

func TestEncryptDecryptRoundTrip(t *testing.T) {
	k := testKey(t, testKeyHex)
	for _, pw := range []string{"", "x", "secret", "p@ss:w/o\"rd ü 密码", strings.Repeat("long", 100)} {
		ct, err := Encrypt(k, pw)
		if err != nil {
			t.Fatal(err)
		}
		if len(pw) >= 6 && strings.Contains(ct, pw) {
			t.Fatalf("ciphertext contains the plaintext")
		}
		got, err := Decrypt(k, ct)
		if err != nil || got != pw {
			t.Fatalf("Decrypt(Encrypt(%q)) = %q, %v", pw, got, err)
		}
		got, kind, err := Classify(ct, k)
		if err != nil || got != pw || kind != Ours {
			t.Fatalf("Classify(Encrypt(%q)) = %q, %v, %v", pw, got, kind, err)
		}
	}
	a, _ := Encrypt(k, "same")
	b, _ := Encrypt(k, "same")
	if a == b {
		t.Fatal("two encryptions of one password are equal: the nonce is not random")
	}
}

func TestClassify(t *testing.T) {
	key := testKey(t, testKeyHex)
	other := testKey(t, strings.Repeat("ab", 32))
	ours, err := Encrypt(key, "hunter2")
	if err != nil {
		t.Fatal(err)
	}
	oursEmpty, _ := Encrypt(key, "")
	raw, _ := base64.StdEncoding.DecodeString(ours)
	truncated := base64.StdEncoding.EncodeToString(raw[:len(raw)-1])
	flipped := append([]byte{}, raw...)
	flipped[len(flipped)-1] ^= 1
	tampered := base64.StdEncoding.EncodeToString(flipped)
	short := base64.StdEncoding.EncodeToString(raw[:minOurs-1])
	// A 32-byte generated password (`openssl rand -base64 32` style) whose
	// byte 16 is not '@'.
	generated := base64.StdEncoding.EncodeToString([]byte("0123456789abcdefXhijklmnopqrstuv"))

	iv := []byte("IVIVIVIVIVIVIVIV")
	dmDefault := dmEncrypt(t, dmDefaultKeyHex, iv, "123456")
	dmDefaultLong := dmEncrypt(t, dmDefaultKeyHex, iv, "a much longer password, over one AES block: 1234567890")
	dmCustom := dmEncrypt(t, strings.Repeat("ab", 32), iv, "custom-key pw")
	dmEmpty := dmEncrypt(t, dmDefaultKeyHex, iv, "")
	// Bytes that are control characters under every key we try: made by
	// encrypting control characters under a key we never configure.
	dmUnknown := dmEncrypt(t, strings.Repeat("cd", 32), iv, "\x01\x02\x03\x04\x05\x06\x07\x08\x01\x02\x03\x04")

	cases := []struct {
		name   string
		stored string
		key    *Key
		want   string
		kind   Kind
		errHas []string // empty: no error
	}{
		{name: "plain", stored: "root123", key: key, want: "root123", kind: Plaintext},
		{name: "plain no key", stored: "root123", want: "root123", kind: Plaintext},
		{name: "empty", stored: "", key: key, want: "", kind: Plaintext},
		{name: "plain with @ and spaces", stored: "a b@c", key: key, want: "a b@c", kind: Plaintext},
		{name: "short base64 is plaintext", stored: "YWJjZA==", key: key, want: "YWJjZA==", kind: Plaintext},
		{name: "base64 with newline is plaintext", stored: ours[:8] + "\n" + ours[8:], key: key, want: ours[:8] + "\n" + ours[8:], kind: Plaintext},
		{name: "ours", stored: ours, key: key, want: "hunter2", kind: Ours},
		{name: "ours empty password", stored: oursEmpty, key: key, want: "", kind: Ours},
		{name: "ours wrong key", stored: ours, key: other, errHas: []string{"does not authenticate", "/etc/dm/test.key", "dmctl encrypt"}},
		{name: "ours truncated", stored: truncated, key: key, errHas: []string{"does not authenticate"}},
		{name: "ours tampered", stored: tampered, key: key, errHas: []string{"does not authenticate"}},
		{name: "too short for ours is plaintext", stored: short, key: key, want: short, kind: Plaintext},
		{name: "ours without key is plaintext", stored: ours, want: ours, kind: Plaintext},
		{name: "generated password with key is an error", stored: generated, key: key, errHas: []string{"must be stored encrypted"}},
		{name: "generated password without key", stored: generated, want: generated, kind: Plaintext},
		{name: "dm default key, no key configured", stored: dmDefault, want: "123456", kind: DMDefaultKey},
		{name: "dm default key, key configured", stored: dmDefault, key: key, want: "123456", kind: DMDefaultKey},
		{name: "dm default key, long", stored: dmDefaultLong, want: "a much longer password, over one AES block: 1234567890", kind: DMDefaultKey},
		{name: "dm empty", stored: dmEmpty, want: "", kind: DMConfiguredKey, key: key},
		{name: "dm custom key configured", stored: dmCustom, key: other, want: "custom-key pw", kind: DMConfiguredKey},
		{name: "dm custom key not configured", stored: dmCustom, errHas: []string{"DM's `dmctl encrypt`", "--secret-key-path"}},
		{name: "dm custom key, other key configured", stored: dmCustom, key: key, errHas: []string{"DM's default key or the key in --secret-key-path /etc/dm/test.key"}},
		{name: "dm unknown key", stored: dmUnknown, key: key, errHas: []string{"does not decrypt to text"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, kind, err := Classify(tc.stored, tc.key)
			if len(tc.errHas) > 0 {
				if err == nil {
					t.Fatalf("Classify = %q (%v), want an error", got, kind)
				}
				if !errors.Is(err, ErrUndecryptable) {
					t.Fatalf("error %v does not wrap ErrUndecryptable", err)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("error %q lacks %q", err, s)
					}
				}
				if tc.stored != "" && strings.Contains(err.Error(), tc.stored) {
					t.Fatalf("error %q contains the stored value", err)
				}
				if got != "" {
					t.Fatalf("got %q with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			if got != tc.want || kind != tc.kind {
				t.Fatalf("Classify = %q, %v; want %q, %v", got, kind, tc.want, tc.kind)
			}
			pw, err := ResolvePassword(tc.stored, tc.key)
			if err != nil || pw != tc.want {
				t.Fatalf("ResolvePassword = %q, %v", pw, err)
			}
		})
	}
}

// TestDMVectorsManyIVs checks DM decryption over many IVs and lengths, each
// a ciphertext from the independent implementation. Without a configured key
// every vector decrypts; with one, a vector is either decrypted right or
// refused as ambiguous (never decrypted wrong), and a short password (whose
// wrong-key decryption is often text) shows the ambiguity error.
func TestDMVectorsManyIVs(t *testing.T) {
	key := testKey(t, testKeyHex)
	ambiguous := 0
	for i := range 300 {
		iv := []byte(fmt.Sprintf("%016d", i*7919))
		pw := strings.Repeat("Pw9!", 20)[i%5 : i%5+i%40+1]
		ct := dmEncrypt(t, dmDefaultKeyHex, iv, pw)
		got, kind, err := Classify(ct, nil)
		if err != nil || got != pw || kind != DMDefaultKey {
			t.Fatalf("vector %d without key: Classify = %q, %v, %v; want %q", i, got, kind, err, pw)
		}
		got, kind, err = Classify(ct, key)
		switch {
		case err != nil && strings.Contains(err.Error(), "ambiguous"):
			ambiguous++
			if len(pw) > 6 {
				t.Logf("vector %d: %d-character password ambiguous", i, len(pw))
			}
		case err != nil || got != pw || kind != DMDefaultKey:
			t.Fatalf("vector %d with key: Classify = %q, %v, %v; want %q", i, got, kind, err, pw)
		}
	}
	if ambiguous == 0 {
		t.Fatal("no short vector was ambiguous: the second key is not tried")
	}
	if ambiguous > 30 {
		t.Fatalf("%d of 300 vectors ambiguous: the text check is too loose", ambiguous)
	}
}

func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		errHas  string
	}{
		{name: "ok", content: testKeyHex, mode: 0o600},
		{name: "ok newline", content: testKeyHex + "\n", mode: 0o600},
		{name: "ok crlf", content: testKeyHex + "\r\n", mode: 0o400},
		{name: "upper hex", content: strings.ToUpper(testKeyHex), mode: 0o600},
		{name: "group readable", content: testKeyHex, mode: 0o640, errHas: "chmod 600"},
		{name: "other readable", content: testKeyHex, mode: 0o604, errHas: "mode 0604"},
		{name: "group writable", content: testKeyHex, mode: 0o620, errHas: "chmod 600"},
		{name: "short", content: testKeyHex[:62], mode: 0o600, errHas: "exactly 64 hex characters"},
		{name: "long", content: testKeyHex + "00", mode: 0o600, errHas: "exactly 64 hex characters"},
		{name: "two newlines", content: testKeyHex + "\n\n", mode: 0o600, errHas: "exactly 64 hex characters"},
		{name: "not hex", content: "zz" + testKeyHex[2:], mode: 0o600, errHas: "only hex characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tc.name, " ", "_")+".key", tc.content, tc.mode)
			k, err := LoadKeyFile(p)
			if tc.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if k.Path() != p {
					t.Fatalf("Path = %q", k.Path())
				}
				if !k.Equal(testKey(t, testKeyHex)) {
					t.Fatal("key bytes differ")
				}
				if s := fmt.Sprintf("%v %s %#v %+v", k, k, k, k); strings.Contains(strings.ToLower(s), testKeyHex[:16]) {
					t.Fatalf("formatting the key shows its bytes: %s", s)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), p) {
				t.Fatalf("LoadKeyFile error = %v; want ErrKeyFile naming %s and %q", err, p, tc.errHas)
			}
			if strings.Contains(strings.ToLower(err.Error()), testKeyHex[2:20]) {
				t.Fatalf("error shows key material: %v", err)
			}
		})
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing.key")); err == nil || !strings.Contains(err.Error(), "missing.key") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := LoadKeyFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
}

func TestGenerateKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "new.key")
	k, err := GenerateKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %04o, want 0600", st.Mode().Perm())
	}
	loaded, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Equal(k) {
		t.Fatal("loaded key differs from the generated one")
	}
	if _, err := GenerateKeyFile(p); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("second GenerateKeyFile: %v", err)
	}
}

func TestNilKey(t *testing.T) {
	if _, err := Encrypt(nil, "x"); err == nil || !strings.Contains(err.Error(), "--secret-key-path") {
		t.Fatalf("Encrypt(nil): %v", err)
	}
	if _, err := Decrypt(nil, "x"); err == nil {
		t.Fatal("Decrypt(nil) succeeded")
	}
	var k *Key
	if k.String() != "secret.Key(none)" || !k.Equal(nil) {
		t.Fatal("nil key")
	}
}
