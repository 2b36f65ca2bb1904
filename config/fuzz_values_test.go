package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// maxErrorLen bounds the error of one bad value: a huge input is clipped,
// not repeated.
const maxErrorLen = 600

func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "100", "64MiB", "1.5GiB", "1GB", " 512 kib ", "8191PiB", "8192PiB",
		"9223372036854775807", "9223372036854775808", "0.5B", "1.0000000001KB", "1e3", "-1", "1.", ".5MiB", "10XB", "", "MiB",
		strings.Repeat("9", 400) + "PiB", "1\u00a0MiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseByteSize(s)
		if err != nil {
			if len(err.Error()) > maxErrorLen {
				t.Fatalf("error of %d bytes for an input of %d", len(err.Error()), len(s))
			}
			return
		}
		if b < 0 {
			t.Fatalf("ParseByteSize(%q) = %d, negative", s, b)
		}
		// String, text and JSON forms all read back to the same size.
		back, err := ParseByteSize(b.String())
		if err != nil || back != b {
			t.Fatalf("ParseByteSize(%q) = %d; String %q reads back as %d, %v", s, b, b.String(), back, err)
		}
		text, _ := b.MarshalText()
		var fromText ByteSize
		if err := fromText.UnmarshalText(text); err != nil || fromText != b {
			t.Fatalf("text %q of %d reads back as %d, %v", text, b, fromText, err)
		}
		js, _ := b.MarshalJSON()
		var fromJSON ByteSize
		if err := fromJSON.UnmarshalJSON(js); err != nil || fromJSON != b {
			t.Fatalf("JSON %s of %d reads back as %d, %v", js, b, fromJSON, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"10s", "5m", "1h30m", "0", "0s", "-1s", "1.5h", " 2ms ", "1ns", "2562047h47m16.854775807s",
		"2562047h47m16.854775808s", "1d", "10", "", "1µs", "1us", ".s", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if len(err.Error()) > maxErrorLen {
				t.Fatalf("error of %d bytes for an input of %d", len(err.Error()), len(s))
			}
			var j Duration
			if jerr := j.UnmarshalJSON([]byte(jsonOf(s))); jerr == nil {
				t.Fatalf("ParseDuration(%q) fails (%v) but its JSON string decodes to %v", s, err, j)
			}
			return
		}
		text, _ := d.MarshalText()
		var fromText Duration
		if err := fromText.UnmarshalText(text); err != nil || fromText != d {
			t.Fatalf("text %q of %v reads back as %v, %v", text, d, fromText, err)
		}
		js, _ := d.MarshalJSON()
		var fromJSON Duration
		if err := fromJSON.UnmarshalJSON(js); err != nil || fromJSON != d {
			t.Fatalf("JSON %s of %v reads back as %v, %v", js, d, fromJSON, err)
		}
	})
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"w1", "mysql-01", "a.b_c-d", "", "-x", ".x", "_x", "a b", "é", "host.example.com",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "a/b", "a\x00b", "..", "x\n", "Ａ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateName("task", s)
		if err != nil {
			if len(err.Error()) > maxErrorLen {
				t.Fatalf("error of %d bytes for a name of %d", len(err.Error()), len(s))
			}
			if !strings.Contains(err.Error(), "task") {
				t.Fatalf("error %q does not say what the name names", err)
			}
		} else if strings.ContainsAny(s, "/\x00 \n") || len(s) > 128 {
			t.Fatalf("ValidateName accepts %q", s)
		}
		out := SanitizeName(s)
		if out != "" && ValidateName("worker", out) != nil {
			t.Fatalf("SanitizeName(%q) = %q, not a valid name", s, out)
		}
		if again := SanitizeName(out); again != out {
			t.Fatalf("SanitizeName is not idempotent: %q -> %q -> %q", s, out, again)
		}
		if err == nil && out != s {
			t.Fatalf("SanitizeName changed the valid name %q to %q", s, out)
		}
	})
}

// FuzzWorkerConfigTOML decodes worker TOML files: never a panic; a file
// that decodes and validates encodes (TOML) and decodes back to an equal,
// still valid config.
func FuzzWorkerConfigTOML(f *testing.F) {
	for _, s := range []string{
		"name = \"w1\"\netcd-endpoints = [\"http://127.0.0.1:2379\"]\nstatus-addr = \"127.0.0.1:8262\"\ndata-dir = \"/var/lib/dm\"\nkeepalive-ttl = \"10s\"\nlog-level = \"info\"\nlog-format = \"json\"\n",
		"name = \"w2\"\nembed-etcd = true\netcd-prefix = \"/dm\"\nrelay-dir = \"/r\"\nadvertise-addr = \"10.0.0.1:8262\"\netcd-cacert = \"ca.pem\"\netcd-cert = \"c.pem\"\netcd-key = \"k.pem\"\n",
		"", "name = 1", "[x]\ny = 2", "keepalive-ttl = \"-1s\"", "keepalive-ttl = 10", "etcd-endpoints = \"http://a:1\"",
		"name = \"a\"\nname = \"b\"", "log-level = \"\"\"\nmulti\"\"\"", "etcd-endpoints = [\"http://u:pw@h:1\", \"://\"]",
		"unknown-key = 1\nother = [1, 2]", "a.b.c = 1", "name = \"\\uD800\"", "x = 1979-05-27T07:32:00Z",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "worker.toml")
	load := func(t *testing.T, data []byte) (*WorkerConfig, error) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadWorkerConfigFile(path)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := load(t, data)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if c.Validate() != nil {
			return
		}
		out, err := c.TOML()
		if err != nil {
			t.Fatalf("encode a valid config: %v", err)
		}
		back, err := load(t, out)
		if err != nil {
			t.Fatalf("re-decode %q: %v", out, err)
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("round trip changed the config:\ninput %q\nencoded %q\n%#v\n%#v", data, out, c, back)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("round trip made it invalid: %v", err)
		}
	})
}
