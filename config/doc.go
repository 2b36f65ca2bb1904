// Package config owns every configuration the worker and dmctl read: the
// source, subtask, task (DM task file), stream and worker configs. It reads
// YAML, JSON and TOML into the same structs (JSON tags, kebab-case field names
// as in DESIGN.md §4), applies defaults in one place, and validates them,
// reporting every problem at once.
//
// It must not touch etcd, the network or the file system beyond reading the
// files it is asked to read.
package config
