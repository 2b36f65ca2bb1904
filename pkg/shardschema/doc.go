// Package shardschema holds the schema rules of optimistic shard DDL
// coordination (issue 25), as pure functions on sqlschema.Table: the join
// of the schemas of a sharding group's member tables (the schema the
// merged target table must have so that every member's rows fit), the
// decision whether one member's change is compatible with the others,
// with a precise reason when it is not, and the target DDL statements that
// turn the old joined schema into the new one.
//
// The rules, after DM's optimistic mode and TiDB's schemacmp:
//
//   - Columns are matched by name, case-insensitively. The joined schema
//     has every column some member has; a column that some members lack
//     must be nullable or have a default (their rows get it), otherwise
//     the join is a conflict. So ADD COLUMN reaches the target with the
//     first member that adds it, DROP COLUMN with the last that drops it.
//   - Column types widen along ladders (typeOrder): TINYINT < SMALLINT <
//     MEDIUMINT < INT < BIGINT of one signedness, FLOAT < DOUBLE,
//     DECIMAL(p,s) by both its integer digits and its scale, CHAR/VARCHAR/
//     BINARY/VARBINARY/BIT by length, TINYTEXT < TEXT < MEDIUMTEXT <
//     LONGTEXT, the BLOBs alike, ENUM/SET by appending members, DATETIME/
//     TIMESTAMP/TIME by fractional digits. NULL is wider than NOT NULL.
//     The join takes the widest; two types on no common ladder (INT and
//     VARCHAR), different character sets, different defaults, or
//     different generated/invisible flags are a conflict.
//   - Indexes are matched by name. A non-unique index is on the target if
//     some member has it (ADD INDEX at the first, DROP INDEX at the last);
//     a unique one only if every member has it, since it constrains the
//     rows of all; the primary key must be the same on every member. One
//     name with two definitions is a conflict.
//   - A single member's change (Compare of its schema before and after)
//     that both widens and narrows (a renamed column reads as a dropped
//     and an added one; a type changed to another ladder) is a conflict:
//     the join alone cannot tell a rename from a drop and an add.
//
// It must not read databases or etcd: callers pass the models in.
package shardschema
