package config

import (
	"testing"
	"time"
)

const streamYAML = `
name: orders-cdc
source-id: mysql-01
block-allow-list: {do-dbs: [shop]}
snapshot: true
start: {binlog-name: mariadb-bin.000002}
sink: {type: file, file: {dir: /var/lib/cdc/orders}}
`

func TestParseStreamConfigDefaults(t *testing.T) {
	c, err := ParseStreamConfig([]byte(streamYAML))
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, c.Validate())
	if c.Sink.File.RotateSize != 64<<20 {
		t.Errorf("rotate-size default: %v", c.Sink.File.RotateSize)
	}
	if c.Start.BinlogPos != 4 {
		t.Errorf("start binlog-pos default: %d", c.Start.BinlogPos)
	}
	w, err := ParseStreamConfig([]byte("name: s\nsource-id: m\nsink: {type: WebHook, webhook: {url: 'http://127.0.0.1:9000/events'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, w.Validate())
	if w.Sink.Type != SinkWebhook || w.Sink.Webhook.Timeout.Duration != 10*time.Second {
		t.Errorf("webhook defaults: %+v", w.Sink)
	}
}

func TestStreamConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		yaml   string
		fields []string
	}{
		{name: "valid file", yaml: streamYAML},
		{name: "valid nats", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://127.0.0.1:4222', subject: cdc.orders}}\n"},
		{name: "valid webhook any host", yaml: "name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: 'https://example.com/x', timeout: 3s}}\n"},
		{name: "names and sink type", yaml: "name: 's/1'\nsource-id: 'm 1'\nsink: {type: kafka}\n",
			fields: []string{"name", "source-id", "sink.type"}},
		{name: "missing sub-configs", yaml: "name: s\nsource-id: m\nsink: {type: file}\n", fields: []string{"sink.file"}},
		{name: "missing webhook", yaml: "name: s\nsource-id: m\nsink: {type: webhook}\n", fields: []string{"sink.webhook"}},
		{name: "missing nats", yaml: "name: s\nsource-id: m\nsink: {type: nats}\n", fields: []string{"sink.nats"}},
		{name: "empty file dir", yaml: "name: s\nsource-id: m\nsink: {type: file, file: {dir: ''}}\n", fields: []string{"sink.file.dir"}},
		{name: "bad webhook", yaml: "name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: '::nope', timeout: -1s}}\n",
			fields: []string{"sink.webhook.url", "sink.webhook.timeout"}},
		{name: "webhook without host", yaml: "name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: 'http:///x'}}\n",
			fields: []string{"sink.webhook.url"}},
		{name: "empty nats", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {}}\n", fields: []string{"sink.nats.url", "sink.nats.subject"}},
		{name: "other type's sub-config", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://h:1', subject: x}, file: {dir: d}}\n",
			fields: []string{"sink.file"}},
		{name: "bad start and ba-list", yaml: "name: s\nsource-id: m\nstart: {binlog-name: b.1, binlog-pos: 1}\nblock-allow-list: {ignore-dbs: ['']}\nsink: {type: file, file: {dir: d}}\n",
			fields: []string{"start.binlog-pos", "block-allow-list.ignore-dbs[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseStreamConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			requireProblems(t, c.Validate(), tt.fields...)
		})
	}
}

func TestStreamConfigRoundTrip(t *testing.T) {
	c, err := ParseStreamConfig([]byte(streamYAML))
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseStreamConfig(j)
	if err != nil || !back.Equal(c) {
		t.Fatalf("round trip of %s: %+v, %v", j, back, err)
	}
	y, err := back.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParseStreamConfig(y)
	if err != nil || !back.Equal(c) {
		t.Fatalf("YAML round trip of %s: %+v, %v", y, back, err)
	}
}
