package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/onlineddl"

	"golang.org/x/net/http/httpguts"
)

// FileSinkConfig writes change events as JSON lines into rotating files
// <dir>/<stream>.<6-digit seq>.jsonl.
type FileSinkConfig struct {
	Dir string `json:"dir"`
	// RotateSize is the size at which the current file is closed and the
	// next sequence number started (default 64MiB).
	RotateSize ByteSize `json:"rotate-size"`
}

// WebhookSinkConfig posts batches of change events to an HTTP endpoint.
type WebhookSinkConfig struct {
	URL string `json:"url"`
	// Timeout bounds one request (default 10s).
	Timeout Duration `json:"timeout"`
	// Batch is the most events one request carries (default 500); a bigger
	// batch is split into several requests.
	Batch int `json:"batch"`
	// Headers are added to every request. Their values are masked wherever
	// the config is shown (they often carry tokens).
	Headers map[string]string `json:"headers,omitempty"`
}

// NATSSinkConfig publishes change events to NATS JetStream.
type NATSSinkConfig struct {
	// URL is one server URL or a comma-separated list of them.
	URL string `json:"url"`
	// Subject is the prefix of every event's subject
	// <subject>.<db>.<table>: dot-separated tokens, no wildcards.
	Subject string `json:"subject"`
	// Stream names the JetStream stream that takes the events. Empty: the
	// stream already bound to <subject>.> is used, or one named after the
	// subject (dots as underscores) is created.
	Stream string `json:"stream,omitempty"`
	// Credentials is the path of a NATS .creds file (JWT and NKey seed).
	Credentials string `json:"credentials,omitempty"`
}

// KafkaSASL authenticates the Kafka producer.
type KafkaSASL struct {
	// Mechanism is plain, scram-sha-256 or scram-sha-512.
	Mechanism string `json:"mechanism"`
	User      string `json:"user"`
	Password  string `json:"password"`
}

// KafkaSinkConfig produces change events to a Kafka topic.
type KafkaSinkConfig struct {
	// Brokers are the seed brokers, host:port each.
	Brokers []string `json:"brokers"`
	Topic   string   `json:"topic"`
	// PartitionBy chooses a record's partition; "key" (the default and only
	// value) hashes the record key, so the events of one row stay in order.
	PartitionBy string `json:"partition-by"`
	// SASL, when set, authenticates with user and password.
	SASL *KafkaSASL `json:"sasl,omitempty"`
	// TLS, when set, connects with TLS: ssl-ca verifies the brokers'
	// certificates (the system's pool when empty), ssl-cert and ssl-key are
	// the client certificate. cert-allowed-cn is not supported here.
	TLS *Security `json:"tls,omitempty"`
}

// SinkConfig says where a stream task sends its change events.
type SinkConfig struct {
	Type    string             `json:"type"`
	File    *FileSinkConfig    `json:"file,omitempty"`
	Webhook *WebhookSinkConfig `json:"webhook,omitempty"`
	NATS    *NATSSinkConfig    `json:"nats,omitempty"`
	Kafka   *KafkaSinkConfig   `json:"kafka,omitempty"`
}

// Sink types.
const (
	SinkFile    = "file"
	SinkWebhook = "webhook"
	SinkNATS    = "nats"
	SinkKafka   = "kafka"
)

// Event formats of a stream (DESIGN.md §4).
const (
	FormatDebezium  = "debezium"
	FormatCanalJSON = "canal-json"
)

// Kafka settings.
const (
	KafkaPartitionByKey = "key"
	SASLPlain           = "plain"
	SASLScramSHA256     = "scram-sha-256"
	SASLScramSHA512     = "scram-sha-512"
)

// StreamConfig defines one change-data-capture stream task of a source.
type StreamConfig struct {
	Name     string `json:"name"`
	SourceID string `json:"source-id"`
	BAList   BAList `json:"block-allow-list"`
	Snapshot bool   `json:"snapshot"`
	Start    Meta   `json:"start"`
	// EventFormat ("format") is the event value's format: debezium
	// (default) or canal-json. (Format is fmt's method of the type.)
	EventFormat string     `json:"format"`
	Sink        SinkConfig `json:"sink"`
	// OnlineDDL: gh-ost and pt-online-schema-change on the source give no
	// events of their shadow and trash tables, and one DDL event of the
	// real table at the cut-over (as a subtask's online-ddl).
	OnlineDDL        bool     `json:"online-ddl,omitempty"`
	ShadowTableRules []string `json:"shadow-table-rules,omitempty"`
	TrashTableRules  []string `json:"trash-table-rules,omitempty"`
	// Filters are the stream's row filters by name, in the shape of DM's
	// expression-filter entries (schema, table, insert-value-expr,
	// update-old-value-expr, update-new-value-expr, delete-value-expr):
	// rows for which a rule's expression is TRUE give no event. See
	// ExpressionFilter.
	Filters map[string]ExpressionFilter `json:"filters,omitempty"`

	// Notes lists what decoding left out or renamed; never encoded.
	Notes DecodeNotes `json:"-" toml:"-"`
}

// Validate reports every problem of the stream config at once as a
// *ValidationError (nil when there is none). Call it after Parse/Adjust.
func (c *StreamConfig) Validate() error {
	var p problems
	p.name("name", "stream", c.Name)
	p.name("source-id", "source", c.SourceID)
	c.BAList.validate(&p, "block-allow-list")
	c.Start.validate(&p, "start")
	if c.EventFormat != FormatDebezium && c.EventFormat != FormatCanalJSON {
		p.add("format", c.EventFormat, "must be debezium or canal-json")
	}
	c.Sink.validate(&p, "sink")
	validateOnlineDDLRules(&p, c.ShadowTableRules, c.TrashTableRules)
	validateExprFilters(&p, "filters", c.Filters)
	return p.err()
}

// OnlineDDLRules are the rules naming the shadow and trash tables of
// online schema changes, nil when online-ddl is off.
func (c *StreamConfig) OnlineDDLRules() (*onlineddl.Rules, error) {
	if !c.OnlineDDL {
		return nil, nil
	}
	return onlineddl.NewRules(c.ShadowTableRules, c.TrashTableRules)
}

func (s *SinkConfig) validate(p *problems, path string) {
	typ := strings.ToLower(s.Type)
	// need reports a missing sub-config of the chosen type.
	need := func(missing bool, name string) bool {
		if missing {
			p.add(join(path, name), "", "must be set when sink.type is "+name)
		}
		return !missing
	}
	switch typ {
	case SinkFile:
		if need(s.File == nil, SinkFile) {
			s.File.validate(p, join(path, SinkFile))
		}
	case SinkWebhook:
		if need(s.Webhook == nil, SinkWebhook) {
			s.Webhook.validate(p, join(path, SinkWebhook))
		}
	case SinkNATS:
		if need(s.NATS == nil, SinkNATS) {
			s.NATS.validate(p, join(path, SinkNATS))
		}
	case SinkKafka:
		if need(s.Kafka == nil, SinkKafka) {
			s.Kafka.validate(p, join(path, SinkKafka))
		}
	default:
		p.add(join(path, "type"), s.Type, "must be file, webhook, nats or kafka")
	}
	// A sub-config of another type is almost always a forgotten edit.
	for _, sub := range []struct {
		name string
		set  bool
	}{{SinkFile, s.File != nil}, {SinkWebhook, s.Webhook != nil}, {SinkNATS, s.NATS != nil}, {SinkKafka, s.Kafka != nil}} {
		if sub.set && typ != sub.name {
			p.add(join(path, sub.name), "set", "must be absent unless sink.type is "+sub.name)
		}
	}
}

func (f *FileSinkConfig) validate(p *problems, path string) {
	if f.Dir == "" {
		p.add(join(path, "dir"), f.Dir, "must not be empty")
	}
	if f.RotateSize <= 0 {
		p.add(join(path, "rotate-size"), int64(f.RotateSize), "must be positive")
	}
}

// webhookOwnHeaders are set by the sink itself and cannot be configured.
var webhookOwnHeaders = []string{"Content-Type", "Idempotency-Key", "Content-Length", "Host"}

func (w *WebhookSinkConfig) validate(p *problems, path string) {
	u, err := url.Parse(w.URL)
	switch {
	case err != nil:
		p.add(join(path, "url"), redactURL(w.URL), "must be an http or https URL")
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		p.add(join(path, "url"), redactURL(w.URL), "must be an http or https URL with a host")
	}
	if w.Timeout.Duration <= 0 {
		p.add(join(path, "timeout"), w.Timeout, "must be positive")
	}
	if w.Batch <= 0 {
		p.add(join(path, "batch"), w.Batch, "must be positive")
	}
	for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
		at := join(join(path, "headers"), name)
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			p.add(at, name, "not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)")
		case slices.ContainsFunc(webhookOwnHeaders, func(h string) bool { return strings.EqualFold(h, name) }):
			p.add(at, name, "is set by the webhook sink itself; remove it from headers")
		case !httpguts.ValidHeaderFieldValue(w.Headers[name]):
			p.add(at, Mask, "the value holds a control character (a line break?); give it on one line")
		}
	}
}

func (n *NATSSinkConfig) validate(p *problems, path string) {
	if strings.TrimSpace(n.URL) == "" {
		p.add(join(path, "url"), "", "must not be empty")
	}
	if err := ValidateNATSSubject(n.Subject); err != nil {
		p.add(join(path, "subject"), n.Subject, err.Error())
	}
	if n.Stream != "" && strings.ContainsAny(n.Stream, " \t\r\n.*>/\\") {
		p.add(join(path, "stream"), n.Stream, "a JetStream stream name must not contain spaces, '.', '*', '>', '/' or '\\'")
	}
}

// ValidateNATSSubject checks a stream's subject prefix: dot-separated
// tokens, none empty, without whitespace and without the wildcards '*' and
// '>' (events are published below it, never subscribed with it).
func ValidateNATSSubject(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	for i, tok := range strings.Split(s, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("token %d is empty: a subject is dot-separated tokens such as cdc.orders, without a leading, trailing or double dot", i+1)
		case strings.ContainsAny(tok, "*>"):
			return fmt.Errorf("token %q is a wildcard: give a plain subject prefix such as cdc.orders (events go to <subject>.<db>.<table>)", tok)
		case strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
			return fmt.Errorf("token %q holds a space or control character", tok)
		}
	}
	return nil
}

func (k *KafkaSinkConfig) validate(p *problems, path string) {
	if len(k.Brokers) == 0 {
		p.add(join(path, "brokers"), "[]", "must list at least one broker as host:port")
	}
	for i, b := range k.Brokers {
		host, port, err := net.SplitHostPort(b)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
			p.add(index(join(path, "brokers"), i), b, "must be host:port")
		}
	}
	if err := validKafkaTopic(k.Topic); err != "" {
		p.add(join(path, "topic"), k.Topic, err)
	}
	if k.PartitionBy != KafkaPartitionByKey {
		p.add(join(path, "partition-by"), k.PartitionBy, `must be "key" (the record key's hash: events of one row stay in order)`)
	}
	if s := k.SASL; s != nil {
		at := join(path, "sasl")
		switch s.Mechanism {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			p.add(join(at, "mechanism"), s.Mechanism, "must be plain, scram-sha-256 or scram-sha-512")
		}
		if s.User == "" {
			p.add(join(at, "user"), "", "must not be empty when sasl is set")
		}
		if s.Password == "" {
			p.add(join(at, "password"), "", "must not be empty when sasl is set")
		}
	}
	if k.TLS != nil {
		at := join(path, "tls")
		k.TLS.validate(p, at)
		if len(k.TLS.CertAllowedCN) > 0 {
			p.add(join(at, "cert-allowed-cn"), fmt.Sprint(k.TLS.CertAllowedCN),
				"not supported for Kafka: brokers are verified by the host names in brokers; remove it")
		}
	}
}

// validKafkaTopic returns what is wrong with a Kafka topic name, or "".
func validKafkaTopic(t string) string {
	switch {
	case t == "":
		return "must not be empty"
	case t == "." || t == "..":
		return `must not be "." or ".."`
	case len(t) > 249:
		return "must be at most 249 characters"
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return "may hold only letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}
