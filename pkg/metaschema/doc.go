// Package metaschema removes one task's rows from the tables units keep in
// the meta schema on the target (every such table is keyed by task and
// source), for `dmctl task start --remove-meta`: the sync unit's, the
// loader's and the validator's meta packages name their tables and call
// it. It knows no unit's tables and never touches a row of another task.
package metaschema
