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

// Redacted returns a deep copy with passwords in the sink URLs masked.
func (c *StreamConfig) Redacted() *StreamConfig {
	r := c.Clone()
	if r.Sink.Webhook != nil {
		r.Sink.Webhook.URL = redactURL(r.Sink.Webhook.URL)
	}
	if r.Sink.NATS != nil {
		r.Sink.NATS.URL = redactURL(r.Sink.NATS.URL)
	}
	return r
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
}

// Format prints the sink for every fmt verb, sub-configs by value and URL
// passwords masked.
func (s SinkConfig) Format(f fmt.State, verb rune) {
	r := s.clone()
	v := sinkConfigView{Type: r.Type}
	if r.File != nil {
		v.File = *r.File
	}
	if r.Webhook != nil {
		r.Webhook.URL = redactURL(r.Webhook.URL)
		v.Webhook = *r.Webhook
	}
	if r.NATS != nil {
		r.NATS.URL = redactURL(r.NATS.URL)
		v.NATS = *r.NATS
	}
	formatPlain(f, verb, "config.SinkConfig", v)
}

// String shows the sink with URL passwords masked.
func (s SinkConfig) String() string { return fmt.Sprintf("%+v", s) }
