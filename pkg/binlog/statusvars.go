package binlog

// The query event status variables this package reads (MySQL's and
// MariaDB's log_event.h): each is a code byte followed by a value whose
// length the code decides.
const (
	qFlags2          = 0
	qSQLMode         = 1
	qCatalog         = 2
	qAutoIncrement   = 3
	qCharset         = 4
	qTimeZone        = 5
	qCatalogNZ       = 6
	qLCTimeNames     = 7
	qCharsetDatabase = 8
	qTableMapForUpd  = 9
	qMasterData      = 10
	qInvoker         = 11
	qMicroseconds    = 13
	qExplicitDefTS   = 16
	qDDLLoggedXID    = 17
	qDefaultCollForU = 18
	qSQLRequirePK    = 19
	qDefaultTableEnc = 20
	qHRNow           = 128 // MariaDB
	qXID             = 129 // MariaDB

	// SQLModeANSIQuotes is sql_mode's ANSI_QUOTES bit in the binlog.
	SQLModeANSIQuotes = 1 << 2
)

// ANSIQuotes reports whether a query event was written with sql_mode
// ANSI_QUOTES (names in double quotes), from its status variables.
func ANSIQuotes(vars []byte) bool {
	mode, _ := SQLMode(vars)
	return mode&SQLModeANSIQuotes != 0
}

// SQLMode returns the sql_mode a query event was written with, from its
// status variables; ok is false when they do not say (or cannot be read),
// then the server's default applies.
func SQLMode(vars []byte) (mode uint64, ok bool) {
	for p := 0; p < len(vars); {
		code := vars[p]
		p++
		var n int
		switch code {
		case qSQLMode:
			if p+8 > len(vars) {
				return 0, false
			}
			for i := 7; i >= 0; i-- {
				mode = mode<<8 | uint64(vars[p+i])
			}
			return mode, true
		case qFlags2, qAutoIncrement, qMasterData:
			n = 4
		case qCharset:
			n = 6
		case qLCTimeNames, qCharsetDatabase, qDefaultCollForU:
			n = 2
		case qTableMapForUpd, qDDLLoggedXID, qXID:
			n = 8
		case qMicroseconds, qHRNow:
			n = 3
		case qExplicitDefTS, qSQLRequirePK, qDefaultTableEnc:
			n = 1
		case qTimeZone, qCatalogNZ:
			if p >= len(vars) {
				return 0, false
			}
			n = 1 + int(vars[p])
		case qCatalog:
			if p >= len(vars) {
				return 0, false
			}
			n = 1 + int(vars[p]) + 1
		case qInvoker:
			if p >= len(vars) {
				return 0, false
			}
			user := int(vars[p])
			if p+1+user >= len(vars) {
				return 0, false
			}
			n = 1 + user + 1 + int(vars[p+1+user])
		default:
			// Codes after SQL_MODE whose length this reader does not
			// know (Q_UPDATED_DB_NAMES, commit timestamps): the servers
			// write SQL_MODE before them.
			return 0, false
		}
		p += n
	}
	return 0, false
}
