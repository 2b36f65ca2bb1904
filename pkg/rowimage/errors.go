package rowimage

// CodeTableInfo is the code of errors resolving a table's row model: the
// binlog lacks what is needed and the target cannot supply it, or a row
// image lacks columns. The string is the sync unit's, shown in status
// since before the model moved here; the validator tells these errors
// apart by it.
const CodeTableInfo = "sync-table-info"
