package config

import (
	"reflect"
	"testing"
)

// trickySeeds are inputs every fuzz target starts from besides real examples.
var trickySeeds = []string{
	"",
	"null",
	"{}",
	"[]",
	"~",
	"---\n---\n",
	"a: &a [*a]",
	"{\"name\": \"x\", \"name\": \"y\"}",
	"name: 1e400\n",
	"source-id: 0x10\n",
	"source-id: yes\n",
	"name: \"\\udc00\"\n",
	"{\"from\": {\"port\": 1.5}}",
	"{\"meta\": {\"binlog-pos\": -1}}",
	"{\"sink\": {\"type\": \"file\", \"file\": null}}",
	"{\"sink\": {\"file\": {\"rotate-size\": \"99999999999PiB\"}}}",
	"checker: {backoff-min: 9223372036s}\n",
	"!!binary aGVsbG8=",
	"? [a]\n: b\n",
	"mysql-instances: [{meta: null}]\n",
	"routes: {\"\": {}}\n",
	"\xff\xfe",
}

// fuzzRoundTrip checks the fuzz property shared by every kind: parsing never
// panics, and a config that parses and validates re-encodes (JSON and YAML)
// and parses back to an equal, still valid config.
func fuzzRoundTrip[C interface {
	Validate() error
	JSON() ([]byte, error)
	YAML() ([]byte, error)
}](t *testing.T, data []byte, parse func([]byte) (C, error), equal func(a, b C) bool) {
	c, err := parse(data)
	if err != nil || c.Validate() != nil {
		return
	}
	for _, enc := range []func() ([]byte, error){c.JSON, c.YAML} {
		out, err := enc()
		if err != nil {
			t.Fatalf("encode a valid config: %v", err)
		}
		back, err := parse(out)
		if err != nil {
			t.Fatalf("re-parse %q: %v", out, err)
		}
		if !equal(c, back) {
			t.Fatalf("round trip changed the config:\ninput %q\nencoded %q", data, out)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("round trip made it invalid: %v", err)
		}
	}
}

func FuzzParseSourceConfig(f *testing.F) {
	f.Add([]byte(sourceYAML))
	f.Add([]byte(`{"source-id":"m1","from":{"host":"db","port":3306,"password":"p"},"checker":{"check-enable":false}}`))
	for _, s := range trickySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, ParseSourceConfig, func(a, b *SourceConfig) bool { return reflect.DeepEqual(a, b) && a.Equal(b) })
	})
}

func FuzzParseSubTaskConfig(f *testing.F) {
	f.Add([]byte(subtaskYAML))
	f.Add([]byte("name: t1\nsource-id: s1\ntask-mode: all\ntarget-database: {host: h}\nblock-allow-list: {do-dbs: []}\nroute-rules: []\n"))
	for _, s := range trickySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, ParseSubTaskConfig, (*SubTaskConfig).Equal)
	})
}

func FuzzParseTaskConfig(f *testing.F) {
	f.Add([]byte(dmTaskYAML))
	f.Add([]byte("name: t\ntask-mode: incremental\ntarget-database: {host: h}\nmysql-instances: [{source-id: s1, meta: {binlog-name: b.1}}]\nroutes: {}\n"))
	for _, s := range trickySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, ParseTaskConfig, (*TaskConfig).Equal)
	})
}

func FuzzParseStreamConfig(f *testing.F) {
	f.Add([]byte(streamYAML))
	f.Add([]byte("name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: 'http://127.0.0.1:9/x', timeout: 1s}}\n"))
	f.Add([]byte("name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://127.0.0.1:4222', subject: a.b}}\n"))
	f.Add([]byte(`{"name":"s","source-id":"m","sink":{"type":"file","file":{"dir":"d","rotate-size":"1.5GiB"}}}`))
	for _, s := range trickySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, ParseStreamConfig, (*StreamConfig).Equal)
	})
}
