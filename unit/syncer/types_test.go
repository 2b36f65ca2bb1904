package syncer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmworker/dm-worker/tests/mariadbtest"
	"github.com/dmworker/dm-worker/tests/testutil"
)

// TestColumnTypesRoundTrip replicates rows covering every column type with
// minimum, maximum, NULL, multi-byte and zero values, then updates and
// deletes some, and checks the target equals the source.
func TestColumnTypesRoundTrip(t *testing.T) {
	e := newEnv(t, mariadbtest.Options{FastCommit: true})
	cfg, src := e.configs(t, "types")
	const ddl = `CREATE TABLE app.types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  de DECIMAL(40,10), de0 DECIMAL(5,0) UNSIGNED, f FLOAT, d DOUBLE,
  dt DATE, tm TIME(3), dtm DATETIME(6), dtm0 DATETIME, ts TIMESTAMP(6) NULL DEFAULT NULL, y YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT, mt MEDIUMTEXT, bl BLOB, bn BINARY(4), vb VARBINARY(10),
  e ENUM('a','b','c'), s SET('x','y','z'), b1 BIT(1), b64 BIT(64), j JSON,
  lat VARCHAR(20) CHARACTER SET latin1, u8 VARCHAR(20) CHARACTER SET utf8mb3
) DEFAULT CHARSET=utf8mb4`
	// No-key table: rows matched on all columns.
	const nokey = `CREATE TABLE app.nokey (a INT, b VARCHAR(10))`
	// The tables reach the target through the replicated DDL.
	mustExec(t, e.srcDB, "CREATE DATABASE app", ddl, nokey)

	u := newUnit(t, cfg, src)
	defer u.Close()
	r := start(u, false)

	mustExec(t, e.srcDB, "SET SESSION sql_mode = ''")
	insert := "INSERT INTO app.types VALUES "
	mustExec(t, e.srcDB,
		insert+`(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
 '-999999999999999999999999999999.9999999999', 0, -3.402823e38, -1.7976931348623157e308,
 '1000-01-01', '-838:59:59.000', '1000-01-01 00:00:00.000000', '1000-01-01 00:00:00', '1970-01-01 00:00:01.000000', 1901,
 '', '', '', '', '', X'00000000', X'', 'a', '', 0, 0, '[]', '', '')`,
		insert+`(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
 '999999999999999999999999999999.9999999999', 99999, 3.402823e38, 1.7976931348623157e308,
 '9999-12-31', '838:59:59.999', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59', '2038-01-19 03:14:07.999999', 2155,
 'zzzzzzzzzz', REPEAT('y', 100), REPEAT('t', 3000), REPEAT('m', 70000), REPEAT(X'FF', 5000), X'FFFFFFFF', X'00FF00FF00FF00FF00FF',
 'c', 'x,y,z', 1, 18446744073709551615, '{"a": [1, 2.5, "x"], "b": {"c": null}}', 'caf\u00e9', 'na\u00efve')`,
		insert+`(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
		insert+`(4, 1, 200, 2, 40000, 3, 9000000, 4, 3000000000, 5, 10000000000000000000,
 '0.0000000001', 1, 1.1, 0.1, '0000-00-00', '00:00:00.5', '0000-00-00 00:00:00.000000', '2024-02-29 12:34:56', '0000-00-00 00:00:00', 0,
 'ab', '日本語テキスト😀', 'Ελληνικά', 'ü', X'0001020304', X'0102', X'', 'b', 'y', 0, 1, '"str"', 'd\u00e9j\u00e0', '€')`,
		insert+`(5, -1, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775808,
 '-0.5', 12345, -0.0, 2.2250738585072014e-308, '2000-01-01', '-00:00:01.001', '2000-01-01 00:00:00.100000', '2000-01-01 00:00:00',
 '2000-06-15 12:00:00.123456', 2000, 'a ', 'trailing  ', 'x', 'y', X'00', X'61', X'6100', 'a', 'x,z', 1, 9223372036854775808,
 '{}', 'x', 'y')`,
		"INSERT INTO app.nokey VALUES (1, 'a'), (1, 'a'), (2, NULL), (NULL, 'n')",
	)
	mustExec(t, e.srcDB,
		"UPDATE app.types SET tiu = 254, biu = 18446744073709551614, vc = CONCAT(vc, '-é'), ts = '2001-02-03 04:05:06.7' WHERE id IN (2, 4)",
		"UPDATE app.types SET id = 40 WHERE id = 4",
		"UPDATE app.types SET j = NULL, bl = NULL, e = NULL WHERE id = 5",
		"DELETE FROM app.types WHERE id = 1",
		"UPDATE app.nokey SET b = 'b' WHERE a = 1 LIMIT 1",
		"DELETE FROM app.nokey WHERE a IS NULL",
		"UPDATE app.nokey SET a = 3 WHERE b IS NULL",
	)
	e.waitEqual(t, same("app.types", "app.nokey"), r)
	// Status shows the read location within an idle tick or two.
	var st Status
	testutil.Eventually(t, 5*time.Second, "status shows the GTID set read", func() error {
		if st = u.Status().(Status); st.BinlogGTID == "" {
			return fmt.Errorf("status binlog %q gtid %q", st.Binlog, st.BinlogGTID)
		}
		return nil
	})
	if res := r.stop(t); !res.IsCanceled || res.Failed() {
		t.Fatalf("Process after cancel = %+v, want canceled without errors", res)
	}
	if st.Inserts != 9 || st.Updates != 6 || st.Deletes != 2 {
		t.Errorf("status counts inserts %d updates %d deletes %d; want 9, 6, 2", st.Inserts, st.Updates, st.Deletes)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "nokey") {
		t.Errorf("status warnings = %q, want one about app.nokey", st.Warnings)
	}
	if !strings.HasPrefix(st.Binlog, "mariadb-bin.") || st.BinlogGTID == "" {
		t.Errorf("status binlog %q gtid %q", st.Binlog, st.BinlogGTID)
	}
}
