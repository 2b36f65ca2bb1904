package syncer

import (
	"errors"

	"github.com/dmworker/dm-worker/pkg/rowimage"
)

// Error codes of the sync unit (stable; shown in status). Each is named
// Code + its string in CamelCase, without the "sync-" every one starts with.
const (
	CodeConfig      = "sync-config"
	CodeReadBinlog  = "sync-read-binlog"
	CodeExec        = "sync-exec"
	CodeDDL         = "sync-ddl"
	CodeDDLParse    = "sync-ddl-parse"
	CodeCheckpoint  = "sync-checkpoint"
	CodeTableInfo   = rowimage.CodeTableInfo
	CodeHandleError = "sync-handle-error"
	// CodeFilterError: an event matched a filter rule whose action is Error.
	CodeFilterError = "sync-filter-error"
	// CodeCollation: collation_compatible strict could not read the
	// source's default collations.
	CodeCollation = "sync-collation"
)

// ErrNothingToHandle is returned by HandleError when the unit is not stuck
// on a DDL and the request names no binlog position.
var ErrNothingToHandle = errors.New("sync: no failed DDL to skip or replace; give binlog-pos of the event")

// ddlAlreadyDone are server errors a replayed DDL gives when it already ran
// before a crash: duplicate column/key, table exists, unknown table/column
// to drop, database exists/does not exist.
var ddlAlreadyDone = map[uint16]bool{
	1007: true, // ER_DB_CREATE_EXISTS
	1008: true, // ER_DB_DROP_EXISTS
	1050: true, // ER_TABLE_EXISTS_ERROR
	1051: true, // ER_BAD_TABLE_ERROR
	1060: true, // ER_DUP_FIELDNAME
	1061: true, // ER_DUP_KEYNAME
	1068: true, // ER_MULTIPLE_PRI_KEY
	1091: true, // ER_CANT_DROP_FIELD_OR_KEY
	1146: true, // ER_NO_SUCH_TABLE
	1054: true, // ER_BAD_FIELD_ERROR (rename/modify of a column already renamed)
}
