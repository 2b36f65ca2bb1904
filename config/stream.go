package config

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
}
