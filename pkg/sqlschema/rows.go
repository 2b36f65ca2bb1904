package sqlschema

import (
	"context"
	"database/sql"
	"errors"
)

// ScanAll runs query with args on q and calls each for every row, closing
// the rows; the first error of the query, of each, of the iteration or of
// the close is returned.
func ScanAll(ctx context.Context, q Querier, query string, args []any, each func(*sql.Rows) error) (err error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return ScanRows(rows, each)
}

// ScanRows calls each for every row of rows, then closes them.
func ScanRows(rows *sql.Rows, each func(*sql.Rows) error) (err error) {
	defer func() { err = errors.Join(err, rows.Close()) }()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// QueryStrings returns the first column of every row of query (NULL as "").
func QueryStrings(ctx context.Context, q Querier, query string, args ...any) ([]string, error) {
	var out []string
	err := ScanAll(ctx, q, query, args, func(rows *sql.Rows) error {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return err
		}
		out = append(out, s.String)
		return nil
	})
	return out, err
}
