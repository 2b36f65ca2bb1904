package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// Load methods.
const (
	// methodLoadData streams a chunk file with LOAD DATA LOCAL INFILE.
	methodLoadData int32 = iota
	// methodInsert sends a chunk's rows as multi-row INSERT statements;
	// used when the target refuses LOAD DATA LOCAL (local_infile=OFF).
	methodInsert
)

// insertBatchBytes bounds one INSERT statement (a longer row makes a
// statement of its own); far below any usable max_allowed_packet.
const insertBatchBytes = 1 << 20

// localInfileRefused reports whether err is the target refusing LOAD DATA
// LOCAL INFILE: ER_NOT_ALLOWED_COMMAND (MySQL 5.7, older MariaDB),
// ER_CLIENT_LOCAL_FILES_DISABLED (MySQL 8) or
// ER_LOAD_INFILE_CAPABILITY_DISABLED (MariaDB 10.5 and later).
func localInfileRefused(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1148 || me.Number == 3948 || me.Number == 4166)
}

// insertRows loads the rows of f into j's target table with multi-row
// INSERT statements in tx, reading the file as it goes (memory bounded by
// insertBatchBytes plus one row); it returns the rows inserted and the
// bytes read. Values go as _binary string literals, so their bytes reach
// the column unconverted, as with LOAD DATA's CHARACTER SET binary.
func insertRows(ctx context.Context, tx *sql.Tx, f io.Reader, j *job) (rows, read int64, err error) {
	cr := &countingReader{r: f}
	rd := dumpfile.NewReader(cr)
	prefix := "INSERT INTO " + j.plan.target.String() + " " + j.plan.insertColumns + " VALUES "
	buf := make([]byte, 0, insertBatchBytes+64<<10)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		res, err := tx.ExecContext(ctx, prefix+string(buf))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		rows += n
		buf = buf[:0]
		return err
	}
	for line := 1; ; line++ {
		fields, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rows, cr.n, fmt.Errorf("row %d of %s: %w", line, j.chunk.File, err)
		}
		if len(fields) != len(j.plan.numeric) {
			return rows, cr.n, fmt.Errorf("row %d of %s has %d fields, the table's dump has %d columns", line, j.chunk.File, len(fields), len(j.plan.numeric))
		}
		if len(buf) > 0 {
			buf = append(buf, ',')
		}
		if buf, err = appendRow(buf, fields, j.plan.numeric); err != nil {
			return rows, cr.n, fmt.Errorf("row %d of %s: %w", line, j.chunk.File, err)
		}
		if j.plan.insertExtend != "" {
			buf = append(append(buf[:len(buf)-1], j.plan.insertExtend...), ')')
		}
		if len(buf) >= insertBatchBytes {
			if err := flush(); err != nil {
				return rows, cr.n, err
			}
		}
	}
	return rows, cr.n, flush()
}

// appendRow appends (v1, v2, ...) of one row: NULL, the digits of a
// numeric field (BIT, YEAR), or a _binary string literal.
func appendRow(buf []byte, fields []dumpfile.Field, numeric []bool) ([]byte, error) {
	buf = append(buf, '(')
	for i, f := range fields {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch {
		case f.Null:
			buf = append(buf, "NULL"...)
		case numeric[i]:
			if len(f.Value) == 0 || strings.Trim(string(f.Value), "0123456789") != "" {
				return nil, fmt.Errorf("field %d is %q, not an unsigned integer", i+1, f.Value)
			}
			buf = append(buf, f.Value...)
		default:
			buf = append(buf, "_binary'"...)
			buf = appendEscaped(buf, f.Value)
			buf = append(buf, '\'')
		}
	}
	return append(buf, ')'), nil
}

// appendEscaped escapes v for a single-quoted literal (the session has no
// NO_BACKSLASH_ESCAPES).
func appendEscaped(buf, v []byte) []byte {
	for _, c := range v {
		switch c {
		case '\\', '\'':
			buf = append(buf, '\\', c)
		case 0:
			buf = append(buf, '\\', '0')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case 0x1a:
			buf = append(buf, '\\', 'Z')
		default:
			buf = append(buf, c)
		}
	}
	return buf
}
