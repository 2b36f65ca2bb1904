package config

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"go.uber.org/zap/zapcore"
)

// Mask replaces a non-empty password wherever a config is shown: String,
// every fmt verb, zap fields and Redacted copies.
const Mask = "******"

// Redacted returns a deep copy whose password is Mask (when non-empty), for
// status output and logs.
func (c DBConfig) Redacted() DBConfig {
	if c.Password != "" {
		c.Password = Mask
	}
	return c
}

// redactURL masks the password of a URL's user info ("nats://u:******@h").
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Unparseable: hide everything before the last '@', if any.
		if i := strings.LastIndexByte(s, '@'); i >= 0 {
			return Mask + s[i:]
		}
		return s
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	// url.Redacted writes "xxxxx" for the password; show Mask like elsewhere.
	return strings.Replace(u.Redacted(), ":xxxxx@", ":"+Mask+"@", 1)
}

// Redacted returns a deep copy with the password of from masked.
func (c *SourceConfig) Redacted() *SourceConfig {
	r := c.Clone()
	r.From = r.From.Redacted()
	return r
}

// Redacted returns a deep copy with the password of target-database masked.
func (c *SubTaskConfig) Redacted() *SubTaskConfig {
	r := c.Clone()
	r.TargetDatabase = r.TargetDatabase.Redacted()
	return r
}

// Redacted returns a deep copy with the password of target-database masked.
func (c *TaskConfig) Redacted() *TaskConfig {
	r := c.Clone()
	r.TargetDatabase = r.TargetDatabase.Redacted()
	return r
}

// Redacted returns a deep copy with the sink's secrets masked: passwords in
// the sink URLs, webhook header values, the Kafka SASL password.
func (c *StreamConfig) Redacted() *StreamConfig {
	r := c.Clone()
	r.Sink = r.Sink.redacted()
	return r
}

// redacted masks the secrets of s in place (s must be a clone).
func (s SinkConfig) redacted() SinkConfig {
	if s.Webhook != nil {
		s.Webhook.URL = redactURL(s.Webhook.URL)
		for k := range s.Webhook.Headers {
			s.Webhook.Headers[k] = Mask
		}
	}
	if s.NATS != nil {
		s.NATS.URL = redactURL(s.NATS.URL)
	}
	if s.Kafka != nil && s.Kafka.SASL != nil && s.Kafka.SASL.Password != "" {
		s.Kafka.SASL.Password = Mask
	}
	return s
}

// Method-less copies of the types that hold secrets: printing them uses the
// plain struct formatting of fmt, and their DBConfig fields still go through
// DBConfig.Format.
type (
	dbConfigPlain      DBConfig
	sourceConfigPlain  SourceConfig
	subTaskConfigPlain SubTaskConfig
	taskConfigPlain    TaskConfig
	streamConfigPlain  StreamConfig
)

// formatPlain prints plain (a method-less, already redacted copy) with the
// caller's verb and flags; for %#v it shows typeName instead of the name of
// the method-less type.
func formatPlain(f fmt.State, verb rune, typeName string, plain any) {
	if verb == 'v' && f.Flag('#') {
		s := fmt.Sprintf("%#v", plain)
		if i := strings.IndexByte(s, '{'); i >= 0 {
			s = typeName + s[i:]
		}
		_, _ = io.WriteString(f, s) // fmt.State writes to fmt's buffer and cannot fail
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), plain)
}

// Format prints the config for every fmt verb with the password masked.
func (c DBConfig) Format(f fmt.State, verb rune) {
	formatPlain(f, verb, "config.DBConfig", dbConfigPlain(c.Redacted()))
}

// String shows the config with the password masked.
func (c DBConfig) String() string { return fmt.Sprintf("%+v", c) }

// GoString shows the config as Go syntax with the password masked.
func (c DBConfig) GoString() string { return fmt.Sprintf("%#v", c) }

// Format prints the config for every fmt verb with the password masked.
func (c SourceConfig) Format(f fmt.State, verb rune) {
	formatPlain(f, verb, "config.SourceConfig", sourceConfigPlain(*c.Redacted()))
}

// String shows the config with the password masked.
func (c SourceConfig) String() string { return fmt.Sprintf("%+v", c) }

// GoString shows the config as Go syntax with the password masked.
func (c SourceConfig) GoString() string { return fmt.Sprintf("%#v", c) }

// Format prints the config for every fmt verb with the password masked.
func (c SubTaskConfig) Format(f fmt.State, verb rune) {
	formatPlain(f, verb, "config.SubTaskConfig", subTaskConfigPlain(*c.Redacted()))
}

// String shows the config with the password masked.
func (c SubTaskConfig) String() string { return fmt.Sprintf("%+v", c) }

// GoString shows the config as Go syntax with the password masked.
func (c SubTaskConfig) GoString() string { return fmt.Sprintf("%#v", c) }

// Format prints the config for every fmt verb with the password masked.
func (c TaskConfig) Format(f fmt.State, verb rune) {
	formatPlain(f, verb, "config.TaskConfig", taskConfigPlain(*c.Redacted()))
}

// String shows the config with the password masked.
func (c TaskConfig) String() string { return fmt.Sprintf("%+v", c) }

// GoString shows the config as Go syntax with the password masked.
func (c TaskConfig) GoString() string { return fmt.Sprintf("%#v", c) }

// Format prints the config for every fmt verb with URL passwords masked.
func (c StreamConfig) Format(f fmt.State, verb rune) {
	formatPlain(f, verb, "config.StreamConfig", streamConfigPlain(*c.Redacted()))
}

// String shows the config with URL passwords masked.
func (c StreamConfig) String() string { return fmt.Sprintf("%+v", c) }

// GoString shows the config as Go syntax with URL passwords masked.
func (c StreamConfig) GoString() string { return fmt.Sprintf("%#v", c) }

// addRedactedFields adds the JSON fields of v (already redacted) to a zap
// object, in key order.
func addRedactedFields(enc zapcore.ObjectEncoder, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("config: encode for log: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("config: encode for log: %w", err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := enc.AddReflected(k, fields[k]); err != nil {
			return err
		}
	}
	return nil
}

// MarshalLogObject logs the config with zap.Object/zap.Any, password masked.
func (c DBConfig) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return addRedactedFields(enc, c.Redacted())
}

// MarshalLogObject logs the config with zap.Object/zap.Any, password masked.
func (c SourceConfig) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return addRedactedFields(enc, c.Redacted())
}

// MarshalLogObject logs the config with zap.Object/zap.Any, password masked.
func (c SubTaskConfig) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return addRedactedFields(enc, c.Redacted())
}

// MarshalLogObject logs the config with zap.Object/zap.Any, password masked.
func (c TaskConfig) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return addRedactedFields(enc, c.Redacted())
}

// MarshalLogObject logs the config with zap.Object/zap.Any, URL passwords
// masked.
func (c StreamConfig) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return addRedactedFields(enc, c.Redacted())
}

// sinkConfigView shows the sub-configs of a SinkConfig by value (a plain
// struct would print their pointers).
type sinkConfigView struct {
	Type    string
	File    any
	Webhook any
	NATS    any
	Kafka   any
}

// Format prints the sink for every fmt verb, sub-configs by value and
// secrets masked.
func (s SinkConfig) Format(f fmt.State, verb rune) {
	r := s.clone().redacted()
	v := sinkConfigView{Type: r.Type}
	if r.File != nil {
		v.File = *r.File
	}
	if r.Webhook != nil {
		v.Webhook = *r.Webhook
	}
	if r.NATS != nil {
		v.NATS = *r.NATS
	}
	if r.Kafka != nil {
		k := *r.Kafka
		v.Kafka = struct {
			Brokers     []string
			Topic       string
			PartitionBy string
			SASL        any
			TLS         any
		}{k.Brokers, k.Topic, k.PartitionBy, derefOrNil(k.SASL), derefOrNil(k.TLS)}
	}
	formatPlain(f, verb, "config.SinkConfig", v)
}

// derefOrNil is *p, or nil for a nil pointer (so that a view prints values).
func derefOrNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// String shows the sink with secrets masked.
func (s SinkConfig) String() string { return fmt.Sprintf("%+v", s) }
