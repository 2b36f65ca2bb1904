package load

// Error codes of the load unit (stable; shown in status). Each is named
// Code + its string in CamelCase.
const (
	// CodeLoadConfig: the subtask or source config cannot be used.
	CodeLoadConfig = "load-config"
	// CodeLoadDump: the dump directory is missing, incomplete, or belongs
	// to another dump than the one the target already holds chunks of.
	CodeLoadDump = "load-dump"
	// CodeLoadSchema: a routed schema or table cannot be created, or an
	// existing target table does not match the dumped columns.
	CodeLoadSchema = "load-schema"
	// CodeLoadChunk: a chunk's rows could not be loaded.
	CodeLoadChunk = "load-chunk"
	// CodeLoadCheckpoint: the load records in the meta schema cannot be
	// read or written.
	CodeLoadCheckpoint = "load-checkpoint"
	// CodeLoadFilterError: a table matched a filter rule whose action is
	// Error.
	CodeLoadFilterError = "load-filter-error"
)
