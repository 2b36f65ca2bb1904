package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// secretKinds are the configs FuzzConfigSecrets injects a password into:
// the field that holds it and how the text of the config leaks it.
var secretKinds = []struct {
	name  string
	field string // top-level block holding the secret
	// inject puts secret into the block (a map decoded from the input).
	inject func(block map[string]any, secret string)
	// check parses data and returns every text a user may see of it.
	check func(data []byte) []string
}{
	{"source", "from", setPassword, func(data []byte) []string {
		c, err := ParseSourceConfig(data)
		if err != nil {
			return []string{err.Error()}
		}
		return append(shown(c, c.Validate()), jsonOf(c.Redacted()))
	}},
	{"subtask", "target-database", setPassword, func(data []byte) []string {
		c, err := ParseSubTaskConfig(data)
		if err != nil {
			return []string{err.Error()}
		}
		return append(shown(c, c.Validate()), jsonOf(c.Redacted()))
	}},
	{"task", "target-database", setPassword, func(data []byte) []string {
		c, err := ParseTaskConfig(data)
		if err != nil {
			return []string{err.Error()}
		}
		out := append(shown(c, c.Validate()), jsonOf(c.Redacted()))
		subs, err := c.SubTaskConfigs()
		if err != nil {
			return append(out, err.Error())
		}
		for _, s := range subs {
			out = append(out, shown(s, s.Validate())...)
			out = append(out, jsonOf(s.Redacted()))
		}
		return out
	}},
	{"stream", "sink", func(block map[string]any, secret string) {
		u := url.URL{Scheme: "http", User: url.UserPassword("u", secret), Host: "127.0.0.1:9", Path: "/hook"}
		hook, _ := block["webhook"].(map[string]any)
		if hook == nil {
			hook = map[string]any{}
		}
		hook["url"] = u.String()
		block["webhook"] = hook
	}, func(data []byte) []string {
		c, err := ParseStreamConfig(data)
		if err != nil {
			return []string{err.Error()}
		}
		return append(shown(c, c.Validate()), jsonOf(c.Redacted()))
	}},
}

func setPassword(block map[string]any, secret string) { block["password"] = secret }

// shown is what printing c (every fmt verb) and its validation error show.
func shown(c any, verr error) []string {
	out := []string{fmt.Sprintf("%v|%+v|%#v|%s", c, c, c, c)}
	if verr != nil {
		out = append(out, verr.Error())
	}
	return out
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// FuzzConfigSecrets checks that a password given in a config never shows:
// not in a decode error, a validation error, any fmt verb of the config, its
// Redacted JSON, nor (task files) in the split subtask configs. The input
// document is fuzzed; the password is put into it at its field (from,
// target-database, a stream sink's URL user info) whatever the rest says.
func FuzzConfigSecrets(f *testing.F) {
	docs := []string{sourceYAML, subtaskYAML, dmTaskYAML, streamYAML}
	secrets := []string{"s3cr3t-P@ss", "p:w/@?#%x", "we'ird\"pass\\word", "пароль-секрет", "x y z ; drop", "******pw", "1e400x"}
	for k := range secretKinds {
		for _, s := range secrets {
			f.Add(uint8(k), []byte(docs[k]), s)
		}
		f.Add(uint8(k), []byte("{}"), "abcdefgh")
	}
	// Documents that fail in the interesting places: bad value types next
	// to the password, an invalid block around it, unknown fields.
	f.Add(uint8(0), []byte(`{"source-id":"m1","from":{"host":"h","port":"x","user":7}}`), "hunter22")
	f.Add(uint8(0), []byte(`{"source-id":"bad id","from":{"host":"","port":0},"checker":{"backoff-min":"0s"}}`), "hunter22")
	f.Add(uint8(1), []byte(`{"name":"t","target-database":{"host":"h","port":99999,"pass":"x"}}`), "hunter22")
	f.Add(uint8(2), []byte(`{"name":"t","target-database":{"security":{"ssl-ca":1}},"mysql-instances":[{"source-id":""}]}`), "hunter22")
	f.Add(uint8(3), []byte(`{"name":"s","source-id":"m","sink":{"type":"webhook","webhook":{"timeout":"x"}}}`), "hunter22")

	f.Fuzz(func(t *testing.T, kind uint8, doc []byte, pw string) {
		k := secretKinds[int(kind)%len(secretKinds)]
		// Short or unprintable passwords turn up in messages by chance or
		// are changed by the JSON encoding of the document.
		if len(pw) < 6 || !utf8.ValidString(pw) || strings.IndexFunc(pw, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return
		}
		var m map[string]any
		if yaml.Unmarshal(doc, &m) != nil || m == nil {
			return
		}
		block, _ := m[k.field].(map[string]any)
		if block == nil {
			block = map[string]any{}
		}
		m[k.field] = block
		rest, err := json.Marshal(m)
		if err != nil {
			return
		}
		// The password's forms that would show it: as is, JSON-escaped,
		// URL-escaped, and its start (a clipped message).
		forms := []string{pw, strings.Trim(jsonOf(pw), `"`), url.PathEscape(pw), url.QueryEscape(pw)}
		if len(pw) > 10 {
			forms = append(forms, pw[:10])
		}
		for _, form := range forms {
			if strings.Contains(string(rest), form) {
				return // the rest of the document says it anyway
			}
		}
		k.inject(block, pw)
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range k.check(data) {
			for _, form := range forms {
				if strings.Contains(text, form) {
					t.Fatalf("%s config: password %q shows as %q in:\n%s\ninput: %s", k.name, pw, form, text, data)
				}
			}
		}
	})
}
