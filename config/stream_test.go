package config

import (
	"fmt"
	"strings"
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
	if w.Sink.Type != SinkWebhook || w.Sink.Webhook.Timeout.Duration != 10*time.Second || w.Sink.Webhook.Batch != 500 {
		t.Errorf("webhook defaults: %+v", w.Sink)
	}
	if c.EventFormat != FormatDebezium || w.EventFormat != FormatDebezium {
		t.Errorf("format default: %q, %q", c.EventFormat, w.EventFormat)
	}
	// What a master writes into etcd: the minimal JSON, decoded leniently.
	k, err := DecodeStreamConfig([]byte(`{"name":"s","source-id":"m","sink":{"type":"kafka","kafka":{"brokers":["127.0.0.1:9092"],"topic":"t","sasl":{"mechanism":"PLAIN","user":"u","password":"p"}}}}`), Lenient)
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, k.Validate())
	if k.Sink.Kafka.PartitionBy != KafkaPartitionByKey || k.Sink.Kafka.SASL.Mechanism != SASLPlain || k.EventFormat != FormatDebezium || !k.Notes.Empty() {
		t.Errorf("kafka defaults: %+v, notes %+v", k.Sink.Kafka, k.Notes)
	}
	n, err := DecodeStreamConfig([]byte(`{"name":"s","source-id":"m","format":"canal-json","sink":{"type":"nats","nats":{"url":"nats://127.0.0.1:4222","subject":"cdc.orders","credentials":"/x.creds"}}}`), Lenient)
	if err != nil {
		t.Fatal(err)
	}
	requireProblems(t, n.Validate())
	if n.Sink.NATS.Stream != "" || n.Sink.NATS.Credentials != "/x.creds" || n.EventFormat != FormatCanalJSON || !n.Notes.Empty() {
		t.Errorf("nats fields: %+v, notes %+v", n.Sink.NATS, n.Notes)
	}
}

// TestStreamConfigSinkSecrets checks that webhook header values and the
// Kafka SASL password never show, and that Clone shares no header map.
func TestStreamConfigSinkSecrets(t *testing.T) {
	const secret = "tok-9f8e7d6c"
	w, err := ParseStreamConfig([]byte("name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: 'http://h/x', headers: {Authorization: 'Bearer " + secret + "'}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseStreamConfig([]byte("name: s\nsource-id: m\nsink: {type: kafka, kafka: {brokers: ['h:1'], topic: t, sasl: {mechanism: plain, user: u, password: " + secret + "}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*StreamConfig{w, k} {
		for _, text := range []string{fmt.Sprintf("%v|%+v|%#v|%s", c, c, c, c), fmt.Sprintf("%+v", c.Sink), jsonOf(c.Redacted())} {
			if strings.Contains(text, secret) {
				t.Errorf("secret shows in %s", text)
			}
		}
	}
	if w.Sink.Webhook.Headers["Authorization"] != "Bearer "+secret || k.Sink.Kafka.SASL.Password != secret {
		t.Error("Redacted changed the original")
	}
	c := w.Clone()
	c.Sink.Webhook.Headers["Authorization"] = "x"
	if w.Sink.Webhook.Headers["Authorization"] == "x" {
		t.Error("Clone shares the headers map")
	}
	kc := k.Clone()
	kc.Sink.Kafka.SASL.User = "other"
	if k.Sink.Kafka.SASL.User != "u" {
		t.Error("Clone shares the SASL block")
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
		{name: "names and sink type", yaml: "name: 's/1'\nsource-id: 'm 1'\nsink: {type: pulsar}\n",
			fields: []string{"name", "source-id", "sink.type"}},
		{name: "bad format", yaml: "name: s\nsource-id: m\nformat: avro\nsink: {type: file, file: {dir: d}}\n", fields: []string{"format"}},
		{name: "valid canal-json kafka", yaml: "name: s\nsource-id: m\nformat: Canal-JSON\nsink: {type: kafka, kafka: {brokers: ['127.0.0.1:9092', 'k2:9093'], topic: cdc.orders}}\n"},
		{name: "valid kafka sasl tls", yaml: "name: s\nsource-id: m\nsink: {type: kafka, kafka: {brokers: ['k:9092'], topic: t, sasl: {mechanism: SCRAM-SHA-512, user: u, password: p}, tls: {ssl-ca: ca.pem}}}\n"},
		{name: "missing kafka", yaml: "name: s\nsource-id: m\nsink: {type: kafka}\n", fields: []string{"sink.kafka"}},
		{name: "bad kafka", yaml: "name: s\nsource-id: m\nsink: {type: kafka, kafka: {brokers: ['nohost', ':9', 'h:0'], topic: 'a b', partition-by: table, sasl: {mechanism: gssapi}, tls: {ssl-cert: c.pem, cert-allowed-cn: [x]}}}\n",
			fields: []string{"sink.kafka.brokers[0]", "sink.kafka.brokers[1]", "sink.kafka.brokers[2]", "sink.kafka.topic", "sink.kafka.partition-by",
				"sink.kafka.sasl.mechanism", "sink.kafka.sasl.user", "sink.kafka.sasl.password", "sink.kafka.tls.ssl-cert", "sink.kafka.tls.cert-allowed-cn"}},
		{name: "kafka without brokers and topic", yaml: "name: s\nsource-id: m\nsink: {type: kafka, kafka: {topic: '..'}}\n",
			fields: []string{"sink.kafka.brokers", "sink.kafka.topic"}},
		{name: "bad webhook batch and headers", yaml: "name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: 'http://h/x', batch: -1, headers: {'Bad Name': x, content-type: text/plain, X-Ok: \"a\\nb\", Authorization: 'Bearer t'}}}\n",
			fields: []string{"sink.webhook.batch", "sink.webhook.headers.Bad Name", "sink.webhook.headers.content-type", "sink.webhook.headers.X-Ok"}},
		{name: "nats subject wildcards and spaces", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://h:1', subject: 'cdc.*', stream: 'a.b'}}\n",
			fields: []string{"sink.nats.subject", "sink.nats.stream"}},
		{name: "nats subject full wildcard", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://h:1', subject: 'cdc.>'}}\n", fields: []string{"sink.nats.subject"}},
		{name: "nats subject space", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://h:1', subject: 'cdc orders'}}\n", fields: []string{"sink.nats.subject"}},
		{name: "nats subject empty token", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://h:1', subject: 'cdc..orders'}}\n", fields: []string{"sink.nats.subject"}},
		{name: "valid nats with stream and creds", yaml: "name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://h:1,nats://h:2', subject: cdc.orders, stream: ORDERS, credentials: /etc/nats/u.creds}}\n"},
		{name: "kafka sub-config on file", yaml: "name: s\nsource-id: m\nsink: {type: file, file: {dir: d}, kafka: {topic: t}}\n", fields: []string{"sink.kafka"}},
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
