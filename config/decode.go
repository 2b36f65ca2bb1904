package config

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Decoding. Every kind has the same helpers:
//
//	ParseXxx(data)        YAML or JSON (YAML is a superset) → defaults → *Xxx, Strict
//	DecodeXxx(data, mode) the same with a DecodeMode (Lenient for etcd values)
//	LoadXxxFile(path)     ParseXxx of the file's content
//	(*Xxx).JSON()         compact JSON, the form stored in etcd
//	(*Xxx).YAML()         YAML with the same field names
//
// Decoding goes through the decode engine (decode_engine.go): over
// NewXxxConfig (so defaults stay where the input is silent), with DM's
// fields accepted, renamed or refused (dmfields.go), unknown fields an error
// listing every path (Strict) or listed in the config's Notes (Lenient),
// duplicate fields an error; then Adjust. It does not validate: call
// Validate on the result. JSON() and YAML() contain passwords in clear (they
// are what the master writes to etcd); use Redacted first to show a config.

// noted is a config kind that carries its DecodeNotes.
type noted interface {
	Adjust()
	setNotes(DecodeNotes)
}

func (c *SourceConfig) setNotes(n DecodeNotes)  { c.Notes = n }
func (c *SubTaskConfig) setNotes(n DecodeNotes) { c.Notes = n }
func (c *TaskConfig) setNotes(n DecodeNotes)    { c.Notes = n }
func (c *StreamConfig) setNotes(n DecodeNotes)  { c.Notes = n }

// parse decodes data over c (pre-filled with defaults), records the notes
// on it and adjusts it.
func parse[C noted](kind string, data []byte, c C, mode DecodeMode) (C, error) {
	notes, fields, err := decodeInto(kind, data, c, mode)
	if err == nil && fields != nil {
		err = fields
	}
	if err != nil {
		var zero C
		return zero, err
	}
	c.setNotes(notes)
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
	return DecodeSourceConfig(data, Strict)
}

// DecodeSourceConfig decodes a SourceConfig like ParseSourceConfig, with unknown fields
// an error (Strict) or listed in Notes (Lenient).
func DecodeSourceConfig(data []byte, mode DecodeMode) (*SourceConfig, error) {
	return parse("source config", data, NewSourceConfig(), mode)
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
	return DecodeSubTaskConfig(data, Strict)
}

// DecodeSubTaskConfig decodes a SubTaskConfig like ParseSubTaskConfig, with unknown fields
// an error (Strict) or listed in Notes (Lenient).
func DecodeSubTaskConfig(data []byte, mode DecodeMode) (*SubTaskConfig, error) {
	return parse("subtask config", data, NewSubTaskConfig(), mode)
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
	return DecodeTaskConfig(data, Strict)
}

// DecodeTaskConfig decodes a TaskConfig like ParseTaskConfig, with unknown fields
// an error (Strict) or listed in Notes (Lenient).
func DecodeTaskConfig(data []byte, mode DecodeMode) (*TaskConfig, error) {
	return parse("task config", data, NewTaskConfig(), mode)
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
	return DecodeStreamConfig(data, Strict)
}

// DecodeStreamConfig decodes a StreamConfig like ParseStreamConfig, with unknown fields
// an error (Strict) or listed in Notes (Lenient).
func DecodeStreamConfig(data []byte, mode DecodeMode) (*StreamConfig, error) {
	return parse("stream config", data, NewStreamConfig(), mode)
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

// DecodeValue decodes data (JSON or YAML) into v with the decode engine but
// without defaults or Adjust: for small values that are not configs (the
// stage and binding values of etcd). It returns the notes; in Strict mode
// unknown fields are an error, in Lenient mode they are listed in
// Notes.Unknown.
func DecodeValue(what string, data []byte, v any, mode DecodeMode) (DecodeNotes, error) {
	notes, fields, err := decodeInto(what, data, v, mode)
	if err == nil && fields != nil {
		err = fields
	}
	return notes, err
}
