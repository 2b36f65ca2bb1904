package sqlschema

import (
	"strings"
)

// QuoteName quotes an identifier with backticks, doubling any backtick in
// it, so that any schema, table or column name can be written into SQL.
func QuoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// QuoteTable quotes schema.table.
func QuoteTable(schema, table string) string { return QuoteName(schema) + "." + QuoteName(table) }

// systemSchemas hold the server's own data; no unit copies, checks or
// streams them, whatever a block-allow list says.
var systemSchemas = []string{"mysql", "information_schema", "performance_schema", "sys"}

// IsSystemSchema reports whether schema is a system schema. The server
// compares schema names case-insensitively here on every platform.
func IsSystemSchema(schema string) bool {
	for _, s := range systemSchemas {
		if strings.EqualFold(s, schema) {
			return true
		}
	}
	return false
}

// SystemSchemaList is the system schemas as an SQL list,
// "('mysql','information_schema','performance_schema','sys')", for
// "TABLE_SCHEMA NOT IN " + SystemSchemaList.
func SystemSchemaList() string {
	quoted := make([]string, len(systemSchemas))
	for i, s := range systemSchemas {
		quoted[i] = "'" + s + "'"
	}
	return "(" + strings.Join(quoted, ",") + ")"
}
