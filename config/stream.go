package config

import (
	"net/url"
	"strings"
)

// FileSinkConfig writes change events as JSON lines into rotating files.
type FileSinkConfig struct {
	Dir        string   `json:"dir"`
	RotateSize ByteSize `json:"rotate-size"`
}

// WebhookSinkConfig posts batches of change events to an HTTP endpoint.
type WebhookSinkConfig struct {
	URL     string   `json:"url"`
	Timeout Duration `json:"timeout"`
}

// NATSSinkConfig publishes change events to a NATS subject.
type NATSSinkConfig struct {
	URL     string `json:"url"`
	Subject string `json:"subject"`
}

// SinkConfig says where a stream task sends its change events.
type SinkConfig struct {
	Type    string             `json:"type"`
	File    *FileSinkConfig    `json:"file,omitempty"`
	Webhook *WebhookSinkConfig `json:"webhook,omitempty"`
	NATS    *NATSSinkConfig    `json:"nats,omitempty"`
}

// Sink types.
const (
	SinkFile    = "file"
	SinkWebhook = "webhook"
	SinkNATS    = "nats"
)

// StreamConfig defines one change-data-capture stream task of a source.
type StreamConfig struct {
	Name     string     `json:"name"`
	SourceID string     `json:"source-id"`
	BAList   BAList     `json:"block-allow-list"`
	Snapshot bool       `json:"snapshot"`
	Start    Meta       `json:"start"`
	Sink     SinkConfig `json:"sink"`

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
	c.Sink.validate(&p, "sink")
	return p.err()
}

func (s *SinkConfig) validate(p *problems, path string) {
	typ := strings.ToLower(s.Type)
	switch typ {
	case SinkFile:
		if s.File == nil {
			p.add(join(path, "file"), "", "must be set when sink.type is file")
		} else {
			if s.File.Dir == "" {
				p.add(join(path, "file.dir"), s.File.Dir, "must not be empty")
			}
			if s.File.RotateSize <= 0 {
				p.add(join(path, "file.rotate-size"), int64(s.File.RotateSize), "must be positive")
			}
		}
	case SinkWebhook:
		if s.Webhook == nil {
			p.add(join(path, "webhook"), "", "must be set when sink.type is webhook")
		} else {
			u, err := url.Parse(s.Webhook.URL)
			switch {
			case err != nil:
				p.add(join(path, "webhook.url"), redactURL(s.Webhook.URL), "must be an http or https URL")
			case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
				p.add(join(path, "webhook.url"), redactURL(s.Webhook.URL), "must be an http or https URL with a host")
			}
			if s.Webhook.Timeout.Duration <= 0 {
				p.add(join(path, "webhook.timeout"), s.Webhook.Timeout, "must be positive")
			}
		}
	case SinkNATS:
		if s.NATS == nil {
			p.add(join(path, "nats"), "", "must be set when sink.type is nats")
		} else {
			if s.NATS.URL == "" {
				p.add(join(path, "nats.url"), "", "must not be empty")
			}
			if s.NATS.Subject == "" {
				p.add(join(path, "nats.subject"), "", "must not be empty")
			}
		}
	default:
		p.add(join(path, "type"), s.Type, "must be file, webhook or nats")
	}
	// A sub-config of another type is almost always a forgotten edit.
	if s.File != nil && typ != SinkFile {
		p.add(join(path, "file"), "set", "must be absent unless sink.type is file")
	}
	if s.Webhook != nil && typ != SinkWebhook {
		p.add(join(path, "webhook"), "set", "must be absent unless sink.type is webhook")
	}
	if s.NATS != nil && typ != SinkNATS {
		p.add(join(path, "nats"), "set", "must be absent unless sink.type is nats")
	}
}
