// Package typestest is the table with a column of every MariaDB type and
// its rows of extremes (minimums, maximums, NULLs, zero dates, multi-byte
// and latin1 text), shared by the sync unit's round-trip test and the
// stream tasks' end-to-end tests, so both prove the same types.
package typestest

import "strings"

// DDL creates the table db.types (a primary key and a column of every
// type).
func DDL(db string) string {
	return "CREATE TABLE " + db + `.types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  de DECIMAL(40,10), de0 DECIMAL(5,0) UNSIGNED, f FLOAT, d DOUBLE,
  dt DATE, tm TIME(3), dtm DATETIME(6), dtm0 DATETIME, ts TIMESTAMP(6) NULL DEFAULT NULL, y YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT, mt MEDIUMTEXT, bl BLOB, bn BINARY(4), vb VARBINARY(10),
  e ENUM('a','b','c'), s SET('x','y','z'), b1 BIT(1), b64 BIT(64), j JSON,
  lat VARCHAR(20) CHARACTER SET latin1, u8 VARCHAR(20) CHARACTER SET utf8mb3
) DEFAULT CHARSET=utf8mb4`
}

// SQLMode is the session sql_mode the rows are written under: zero dates
// are among them.
const SQLMode = "SET SESSION sql_mode = ''"

// Inserts are the INSERT statements of rows 1 to 5 of db.types.
func Inserts(db string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = "INSERT INTO " + db + ".types VALUES " + strings.TrimSpace(r)
	}
	return out
}

var rows = []string{
	`(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
 '-999999999999999999999999999999.9999999999', 0, -3.402823e38, -1.7976931348623157e308,
 '1000-01-01', '-838:59:59.000', '1000-01-01 00:00:00.000000', '1000-01-01 00:00:00', '1970-01-01 00:00:01.000000', 1901,
 '', '', '', '', '', X'00000000', X'', 'a', '', 0, 0, '[]', '', '')`,
	`(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
 '999999999999999999999999999999.9999999999', 99999, 3.402823e38, 1.7976931348623157e308,
 '9999-12-31', '838:59:59.999', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59', '2038-01-19 03:14:07.999999', 2155,
 'zzzzzzzzzz', REPEAT('y', 100), REPEAT('t', 3000), REPEAT('m', 70000), REPEAT(X'FF', 5000), X'FFFFFFFF', X'00FF00FF00FF00FF00FF',
 'c', 'x,y,z', 1, 18446744073709551615, '{"a": [1, 2.5, "x"], "b": {"c": null}}', 'caf\u00e9', 'na\u00efve')`,
	`(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
	`(4, 1, 200, 2, 40000, 3, 9000000, 4, 3000000000, 5, 10000000000000000000,
 '0.0000000001', 1, 1.1, 0.1, '0000-00-00', '00:00:00.5', '0000-00-00 00:00:00.000000', '2024-02-29 12:34:56', '0000-00-00 00:00:00', 0,
 'ab', '日本語テキスト😀', 'Ελληνικά', 'ü', X'0001020304', X'0102', X'', 'b', 'y', 0, 1, '"str"', 'd\u00e9j\u00e0', '€')`,
	`(5, -1, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775808,
 '-0.5', 12345, -0.0, 2.2250738585072014e-308, '2000-01-01', '-00:00:01.001', '2000-01-01 00:00:00.100000', '2000-01-01 00:00:00',
 '2000-06-15 12:00:00.123456', 2000, 'a ', 'trailing  ', 'x', 'y', X'00', X'61', X'6100', 'a', 'x,z', 1, 9223372036854775808,
 '{}', 'x', 'y')`,
}
