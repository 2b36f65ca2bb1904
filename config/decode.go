package config

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Decoding. Every kind has the same four helpers:
//
//	ParseXxx(data)      YAML or JSON (YAML is a superset) → defaults → *Xxx
//	LoadXxxFile(path)   ParseXxx of the file's content
//	(*Xxx).JSON()       compact JSON, the form stored in etcd
//	(*Xxx).YAML()       YAML with the same field names
//
// Parse decodes over NewXxxConfig (so defaults stay where the input is
// silent), rejects unknown and duplicate fields naming them, then calls
// Adjust. It does not validate: call Validate on the result. JSON() and
// YAML() contain passwords in clear (they are what the master writes to
// etcd); use Redacted first to show a config.

// decodeStrict reads YAML or JSON into c, rejecting unknown and duplicate
// fields.
func decodeStrict(kind string, data []byte, c any) error {
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return fmt.Errorf("config: decode %s: %w", kind, err)
	}
	return nil
}

// parse decodes data over c (pre-filled with defaults) and adjusts it.
func parse[C interface{ Adjust() }](kind string, data []byte, c C) (C, error) {
	if err := decodeStrict(kind, data, c); err != nil {
		var zero C
		return zero, err
	}
	c.Adjust()
	return c, nil
}

// loadFile reads path and parses its content.
func loadFile[C any](path string, parse func([]byte) (C, error)) (C, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var zero C
		return zero, fmt.Errorf("config: read %s: %w", path, err)
	}
	c, err := parse(data)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func toYAML(kind string, c any) ([]byte, error) {
	out, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("config: encode %s as YAML: %w", kind, err)
	}
	return out, nil
}

func toJSON(kind string, c any) ([]byte, error) {
	out, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("config: encode %s as JSON: %w", kind, err)
	}
	return out, nil
}

// ParseSourceConfig decodes a SourceConfig from YAML or JSON and applies
// defaults; it does not validate.
func ParseSourceConfig(data []byte) (*SourceConfig, error) {
	return parse("source config", data, NewSourceConfig())
}

// LoadSourceConfigFile reads and parses a SourceConfig file; it does not
// validate.
func LoadSourceConfigFile(path string) (*SourceConfig, error) {
	return loadFile(path, ParseSourceConfig)
}

// JSON encodes the config (password in clear) as compact JSON.
func (c *SourceConfig) JSON() ([]byte, error) { return toJSON("source config", c) }

// YAML encodes the config (password in clear) as YAML.
func (c *SourceConfig) YAML() ([]byte, error) { return toYAML("source config", c) }

// ParseSubTaskConfig decodes a SubTaskConfig from YAML or JSON and applies
// defaults; it does not validate.
func ParseSubTaskConfig(data []byte) (*SubTaskConfig, error) {
	return parse("subtask config", data, NewSubTaskConfig())
}

// LoadSubTaskConfigFile reads and parses a SubTaskConfig file; it does not
// validate.
func LoadSubTaskConfigFile(path string) (*SubTaskConfig, error) {
	return loadFile(path, ParseSubTaskConfig)
}

// JSON encodes the config (password in clear) as compact JSON.
func (c *SubTaskConfig) JSON() ([]byte, error) { return toJSON("subtask config", c) }

// YAML encodes the config (password in clear) as YAML.
func (c *SubTaskConfig) YAML() ([]byte, error) { return toYAML("subtask config", c) }

// ParseTaskConfig decodes a DM task file from YAML or JSON and applies
// defaults; it does not validate.
func ParseTaskConfig(data []byte) (*TaskConfig, error) {
	return parse("task config", data, NewTaskConfig())
}

// LoadTaskConfigFile reads and parses a DM task file; it does not validate.
func LoadTaskConfigFile(path string) (*TaskConfig, error) {
	return loadFile(path, ParseTaskConfig)
}

// JSON encodes the config (password in clear) as compact JSON.
func (c *TaskConfig) JSON() ([]byte, error) { return toJSON("task config", c) }

// YAML encodes the config (password in clear) as YAML.
func (c *TaskConfig) YAML() ([]byte, error) { return toYAML("task config", c) }

// ParseStreamConfig decodes a StreamConfig from YAML or JSON and applies
// defaults; it does not validate.
func ParseStreamConfig(data []byte) (*StreamConfig, error) {
	return parse("stream config", data, NewStreamConfig())
}

// LoadStreamConfigFile reads and parses a StreamConfig file; it does not
// validate.
func LoadStreamConfigFile(path string) (*StreamConfig, error) {
	return loadFile(path, ParseStreamConfig)
}

// JSON encodes the config (sink URLs in clear) as compact JSON.
func (c *StreamConfig) JSON() ([]byte, error) { return toJSON("stream config", c) }

// YAML encodes the config (sink URLs in clear) as YAML.
func (c *StreamConfig) YAML() ([]byte, error) { return toYAML("stream config", c) }
