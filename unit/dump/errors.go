package dump

// Error codes of the dump unit (stable; shown in status). Each is named
// Code + its string in CamelCase.
const (
	// CodeDumpConfig: the subtask or source config cannot be used.
	CodeDumpConfig = "dump-config"
	// CodeDumpDir: the dump directory cannot be used (foreign files, a
	// file that cannot be written or removed).
	CodeDumpDir = "dump-dir"
	// CodeDumpSnapshot: the consistent snapshot or its binlog location
	// could not be taken.
	CodeDumpSnapshot = "dump-snapshot"
	// CodeDumpRead: reading the source's tables failed.
	CodeDumpRead = "dump-read"
)

// MariaDB error numbers the snapshot handles.
const (
	erDBAccessDenied        = 1044 // ER_DBACCESS_DENIED_ERROR
	erAccessDenied          = 1045 // ER_ACCESS_DENIED_ERROR
	erSpecificAccessDenied  = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR (no RELOAD)
	erTableDefChanged       = 1412 // ER_TABLE_DEF_CHANGED
	erUnknownSystemVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE (MySQL has no @@gtid_binlog_pos)
)
