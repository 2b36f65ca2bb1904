package config

import "time"

// Duration is a time.Duration written as a Go duration string ("10s", "5m")
// in YAML, JSON and TOML.
type Duration struct {
	time.Duration
}

// ByteSize is a size in bytes written with an optional suffix ("64MiB",
// "1GB", "512") in YAML, JSON and TOML.
type ByteSize int64
