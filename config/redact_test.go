package config

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const secret = "Sup3r-S3cret"

func TestPasswordNeverShown(t *testing.T) {
	src, err := ParseSourceConfig([]byte("source-id: 'bad id'\nfrom: {host: h, port: 0, user: u, password: " + secret + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	src.From.Port = -1
	sub, err := ParseSubTaskConfig([]byte("name: t\nsource-id: s\ntask-mode: all\ntarget-database: {host: '', password: " + secret + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	task, err := ParseTaskConfig([]byte("name: t\ntask-mode: all\ntarget-database: {host: h, password: " + secret + "}\nmysql-instances: [{source-id: s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := ParseStreamConfig([]byte("name: s\nsource-id: m\nsink: {type: webhook, webhook: {url: 'http://u:" + secret + "@127.0.0.1:1/x'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	natsStream, err := ParseStreamConfig([]byte("name: s\nsource-id: m\nsink: {type: nats, nats: {url: 'nats://u:" + secret + "@[::1', subject: x}}\n"))
	if err != nil {
		t.Fatal(err)
	}

	values := map[string]any{
		"db":     src.From,
		"source": src, "source value": *src,
		"subtask": sub, "subtask value": *sub,
		"task": task, "task value": *task,
		"stream": stream, "stream value": *stream,
		"nats stream": natsStream, "sink": stream.Sink,
	}
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) {
				t.Errorf("%s with %s shows the password: %s", name, verb, out)
			}
		}
		if s := fmt.Sprint(v); !strings.Contains(s, Mask) {
			t.Errorf("%s: password not shown as %s: %s", name, Mask, s)
		}
		logger.Info("config", zap.Any("cfg", v))
		if sv, ok := v.(fmt.Stringer); ok {
			logger.Info("config", zap.Stringer("cfg", sv))
		}
	}
	for _, e := range logs.All() {
		enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), secret) {
			t.Errorf("log line shows the password: %s", buf.String())
		}
		if !strings.Contains(buf.String(), Mask) {
			t.Errorf("log line lacks the mask: %s", buf.String())
		}
		buf.Free()
	}

	// Validation errors never echo the password.
	for name, err := range map[string]error{"source": src.Validate(), "subtask": sub.Validate(), "task": task.Validate(), "stream": stream.Validate()} {
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s validation error shows the password: %v", name, err)
		}
	}
	badURL := stream.Clone()
	badURL.Sink.Webhook.URL = "ftp://u:" + secret + "@h/x"
	if err := badURL.Validate(); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("bad webhook URL error: %v", err)
	}

	// Redacted masks, leaves the original alone, and keeps an empty
	// password empty.
	if r := src.Redacted(); r.From.Password != Mask || src.From.Password != secret {
		t.Errorf("Redacted: %q, original %q", r.From.Password, src.From.Password)
	}
	if r := sub.Redacted(); r.TargetDatabase.Password != Mask {
		t.Errorf("subtask Redacted: %q", r.TargetDatabase.Password)
	}
	if r := task.Redacted(); r.TargetDatabase.Password != Mask {
		t.Errorf("task Redacted: %q", r.TargetDatabase.Password)
	}
	if r := stream.Redacted(); r.Sink.Webhook.URL != "http://u:"+Mask+"@127.0.0.1:1/x" || !strings.Contains(stream.Sink.Webhook.URL, secret) {
		t.Errorf("stream Redacted: %q", r.Sink.Webhook.URL)
	}
	if r := (DBConfig{Host: "h"}).Redacted(); r.Password != "" {
		t.Errorf("empty password became %q", r.Password)
	}
	// JSON keeps the password: it is what etcd holds.
	if j, _ := src.JSON(); !strings.Contains(string(j), secret) {
		t.Errorf("JSON lost the password: %s", j)
	}
}
