// Package sqlschema is the one place that knows how a MySQL/MariaDB table
// is described: its model (columns with types, nullability and
// generated/invisible flags, indexes, the row key chosen and why), the one
// reader of that model from information_schema, the identifier quoter and
// the list of system schemas. Every unit (dump, load, sync, validator,
// check) and the stream tasks use it instead of reading information_schema
// on their own, after go-mysql's schema package that all of canal shares.
//
// It holds no connections and starts no goroutines: callers pass the
// *sql.DB, *sql.Conn or *sql.Tx to read through. It must not know about
// tasks, binlog events or targets; those live with the units.
package sqlschema
