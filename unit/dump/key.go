package dump

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// readKey finds the key to split t on (sqlschema.ChooseKeyset: the primary
// key, else the first unique BTREE key whose columns are all NOT NULL and
// whole, if every column of it has a type that splits exactly; BIT does).
// Its values are read as raw bytes (SET NAMES binary), so text literals
// carry each column's own charset. None is logged: the table is then one
// chunk.
func readKey(ctx context.Context, c *sql.Conn, t tableRef, tbl *sqlschema.Table, log *zap.Logger) (*sqlschema.Keyset, error) {
	key, rejected, err := sqlschema.ChooseKeyset(tbl, "binary")
	if err != nil {
		return nil, errs.New(CodeDumpRead, true, "dump: %w; DDL during the dump is not supported; resume to dump again", err)
	}
	for _, r := range rejected {
		log.Info("a key cannot split the table exactly; trying the next key", zap.String("key", r.Index), zap.String("reason", r.Reason))
	}
	switch {
	case key != nil:
	case len(rejected) == 0:
		log.Info("the table has no primary key or unique key of NOT NULL columns; it is dumped as one chunk")
	default:
		log.Info("no key of the table can split it; it is dumped as one chunk")
	}
	return key, nil
}

// keyLiterals writes a row of key values read as raw bytes as literals.
func keyLiterals(key *sqlschema.Keyset, vals []sql.RawBytes) ([]string, error) {
	raw := make([][]byte, len(vals))
	for i, v := range vals {
		raw[i] = v
	}
	return key.Literals(raw)
}

// keyNames are the key's column names (none without a key).
func keyNames(key *sqlschema.Keyset) []string {
	if key == nil {
		return nil
	}
	return key.Names()
}

// describe is a short form of a key's column list for logs.
func describe(key *sqlschema.Keyset) string {
	return fmt.Sprintf("(%s)", strings.Join(keyNames(key), ", "))
}
