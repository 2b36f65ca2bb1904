// Package config owns every configuration the worker and dmctl read: the
// source, subtask, task (DM task file), stream and worker configs. It reads
// YAML, JSON and TOML into the same structs (JSON tags, kebab-case field names
// as in DESIGN.md §4), applies defaults in one place, and validates them,
// reporting every problem at once.
//
// It must not touch etcd, the network or the file system beyond reading the
// files it is asked to read.
//
// # Decoding
//
// One mechanism serves every config kind: the input
// (YAML or JSON) is read into a generic tree, the tree is walked against the
// Go type it is decoded into, and every field is classified by its full
// path ("mysql-instances[0].mydumper-thread", "from.security.ssl-ca"):
//
//   - a field of the Go type (by its json tag) is decoded;
//   - a field of DM's formats that means nothing here (see dmFieldRules) is
//     dropped from the tree and listed in DecodeNotes.Ignored;
//   - an old DM name is renamed to the current one and listed in
//     DecodeNotes.Renamed;
//   - a DM field whose value asks for something this worker does not do
//     (sharding DDL coordination, ...) is refused with a message;
//   - anything else is unknown: an error listing every unknown path in
//     Strict mode, listed in DecodeNotes.Unknown (and dropped) in Lenient
//     mode.
//
// The cleaned tree is then decoded over the kind's defaults and adjusted.
package config
