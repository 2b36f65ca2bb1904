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
	// qCharsetColls is MariaDB's Q_CHARACTER_SET_COLLATIONS (11.2 on): a
	// count byte, then count pairs of 2-byte collation ids, the character
	// set's own default and the collation character_set_collations makes
	// its default in the session.
	qCharsetColls = 131

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
	walkStatusVars(vars, func(code byte, v []byte) bool {
		if code != qSQLMode {
			return true
		}
		for i := 7; i >= 0; i-- {
			mode = mode<<8 | uint64(v[i])
		}
		ok = true
		return false
	})
	return mode, ok
}

// SessionCollations are the collation settings of the session that wrote
// a query event, as collation ids (0: the event does not say).
type SessionCollations struct {
	// Server is collation_server: what CREATE DATABASE without a
	// character set or collation gets.
	Server uint16
	// UTF8MB4 is MySQL 8's default_collation_for_utf8mb4.
	UTF8MB4 uint16
	// Defaults are MariaDB's character_set_collations: each a collation
	// the session makes its character set's default.
	Defaults []uint16
}

// Collations returns the collation settings a query event was written
// with, from its status variables; what they do not say (or what follows
// a variable this reader cannot step over) is zero.
func Collations(vars []byte) SessionCollations {
	var c SessionCollations
	walkStatusVars(vars, func(code byte, v []byte) bool {
		switch code {
		case qCharset: // character_set_client, collation_connection, collation_server
			c.Server = uint16(v[4]) | uint16(v[5])<<8
		case qDefaultCollForU:
			c.UTF8MB4 = uint16(v[0]) | uint16(v[1])<<8
		case qCharsetColls:
			for p := 1; p+4 <= len(v); p += 4 {
				c.Defaults = append(c.Defaults, uint16(v[p+2])|uint16(v[p+3])<<8)
			}
		}
		return true
	})
	return c
}

// walkStatusVars calls fn with each status variable's code and value, in
// order, until fn returns false, the variables end, or a code whose length
// this reader does not know (Q_UPDATED_DB_NAMES, commit timestamps,
// MariaDB's Q_GTID_FLAGS3) or a truncated value comes: the servers write
// SQL_MODE and CHARSET before those.
func walkStatusVars(vars []byte, fn func(code byte, v []byte) bool) {
	for p := 0; p < len(vars); {
		code := vars[p]
		p++
		var n int
		switch code {
		case qSQLMode, qTableMapForUpd, qDDLLoggedXID, qXID:
			n = 8
		case qFlags2, qAutoIncrement, qMasterData:
			n = 4
		case qCharset:
			n = 6
		case qLCTimeNames, qCharsetDatabase, qDefaultCollForU:
			n = 2
		case qMicroseconds, qHRNow:
			n = 3
		case qExplicitDefTS, qSQLRequirePK, qDefaultTableEnc:
			n = 1
		case qTimeZone, qCatalogNZ:
			if p >= len(vars) {
				return
			}
			n = 1 + int(vars[p])
		case qCatalog:
			if p >= len(vars) {
				return
			}
			n = 1 + int(vars[p]) + 1
		case qInvoker:
			if p >= len(vars) {
				return
			}
			user := int(vars[p])
			if p+1+user >= len(vars) {
				return
			}
			n = 1 + user + 1 + int(vars[p+1+user])
		case qCharsetColls:
			if p >= len(vars) {
				return
			}
			n = 1 + 4*int(vars[p])
		default:
			return
		}
		if p+n > len(vars) {
			return
		}
		if !fn(code, vars[p:p+n]) {
			return
		}
		p += n
	}
}
