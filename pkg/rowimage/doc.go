// Package rowimage owns the row model that the sync unit and the validator
// share: how a binlog row image of one source table, given its
// TableMapEvent and the target table's sqlschema model, becomes the SQL
// values written to (and compared with) the target, which columns identify
// a row and every unique key (the positions both key their work by), the
// exact byte encoding of a key, and the WHERE form of a value. Both read a
// row exactly as the target was given it because both go through here.
//
// It reads the target's table models through sqlschema (the one reader of
// information_schema) and routes names with pkg/filter's Router, whose
// extend columns (DM's extend-column) a shard's rows carry (extend.go). It must
// not know about batches, compaction, foreign key groups, checkpoints,
// table points or validation state: those stay with the units. It holds no
// connections of its own and starts no goroutines.
package rowimage
