// Package ddlkind classifies the statements of binlog query events that no
// consumer of the binlog replays: stored programs (triggers, procedures,
// functions, events, packages), views, account management, tablespaces,
// servers, plugins, table maintenance and the like. The sync unit, the
// validator and stream tasks ask it first, before they parse a statement,
// so that the set of statements skipped is the same everywhere and a
// statement the DDL parser does not know (CREATE TRIGGER is one) never
// stops replication.
//
// Why skipping is right: the sources run binlog_format=ROW, so what a
// trigger, procedure, function or event writes already arrives as row
// events; replaying the program on the target would apply its writes a
// second time. Views hold no rows. Accounts, tablespaces and plugins are
// server administration, not data. The list follows DM's built-in skip
// list (dm/pkg/utils: builtInSkipDDLs), extended with MariaDB's syntax
// (OR REPLACE, IF [NOT] EXISTS, PACKAGE, ROLE, SERVER, SONAME).
//
// The package holds only classification: it runs nothing and owns no state.
package ddlkind

import (
	"regexp"
	"strings"
)

// Kind names a class of statement that is skipped.
type Kind string

// The kinds of skipped statements.
const (
	Trigger     Kind = "trigger"
	Procedure   Kind = "procedure"
	Function    Kind = "function"
	Event       Kind = "event"
	Package     Kind = "package"
	View        Kind = "view"
	Account     Kind = "account"
	Tablespace  Kind = "tablespace"
	Server      Kind = "server"
	Plugin      Kind = "plugin"
	Maintenance Kind = "maintenance"
	Temporary   Kind = "temporary-table"
	Session     Kind = "session"
)

// Pieces of the patterns below.
const (
	// quoted or bare identifier, possibly user@host
	ident   = "(?:`[^`]*`|'[^']*'|\"[^\"]*\"|[^\\s@`'\"(]+)"
	user    = ident + "(?:\\s*@\\s*" + ident + ")?(?:\\s*\\(\\s*\\))?"
	definer = "(?:DEFINER\\s*=\\s*" + user + "\\s+)?"
	orRepl  = "(?:OR\\s+REPLACE\\s+)?"
	// view options: ALGORITHM = x, DEFINER = x, SQL SECURITY x, in this order
	viewOpts = "(?:ALGORITHM\\s*=\\s*\\w+\\s+)?" + definer + "(?:SQL\\s+SECURITY\\s+\\w+\\s+)?"
)

// patterns are tried in order on the statement with its leading comments
// removed; each is anchored at the start and case-insensitive.
var patterns = []struct {
	kind Kind
	re   *regexp.Regexp
}{
	{Trigger, compile("CREATE\\s+" + orRepl + definer + "TRIGGER\\b")},
	{Trigger, compile("DROP\\s+TRIGGER\\b")},
	{Procedure, compile("CREATE\\s+" + orRepl + definer + "PROCEDURE\\b")},
	{Procedure, compile("(?:ALTER|DROP)\\s+PROCEDURE\\b")},
	{Function, compile("CREATE\\s+" + orRepl + definer + "(?:AGGREGATE\\s+)?FUNCTION\\b")},
	{Function, compile("(?:ALTER|DROP)\\s+FUNCTION\\b")},
	{Event, compile("(?:CREATE\\s+" + orRepl + "|ALTER\\s+)" + definer + "EVENT\\b")},
	{Event, compile("DROP\\s+EVENT\\b")},
	{Package, compile("CREATE\\s+" + orRepl + definer + "PACKAGE\\b")},
	{Package, compile("DROP\\s+PACKAGE\\b")},
	{View, compile("(?:CREATE\\s+" + orRepl + "|ALTER\\s+)" + viewOpts + "VIEW\\b")},
	{View, compile("DROP\\s+VIEW\\b")},
	{Account, compile("(?:GRANT|REVOKE)\\b")},
	{Account, compile("(?:CREATE|ALTER|RENAME|DROP)\\s+(?:" + orRepl + ")?(?:USER|ROLE)\\b")},
	{Account, compile("SET\\s+(?:PASSWORD|DEFAULT\\s+ROLE|ROLE)\\b")},
	{Tablespace, compile("(?:CREATE|ALTER|DROP)\\s+(?:UNDO\\s+)?TABLESPACE\\b")},
	{Tablespace, compile("(?:CREATE|ALTER|DROP)\\s+LOGFILE\\s+GROUP\\b")},
	{Server, compile("(?:CREATE\\s+" + orRepl + "|ALTER\\s+|DROP\\s+)SERVER\\b")},
	{Plugin, compile("(?:INSTALL|UNINSTALL)\\s+(?:PLUGIN|SONAME)\\b")},
	{Maintenance, compile("(?:OPTIMIZE|ANALYZE|REPAIR|CHECK)\\s+(?:NO_WRITE_TO_BINLOG\\s+|LOCAL\\s+)?TABLES?\\b")},
	{Maintenance, compile("FLUSH\\b")},
	{Temporary, compile("DROP\\s+TEMPORARY\\s+TABLE\\b")},
	{Session, compile("(?:SAVEPOINT|RELEASE\\s+SAVEPOINT|ROLLBACK\\s+TO)\\b")},
}

func compile(p string) *regexp.Regexp { return regexp.MustCompile("(?is)^" + p) }

// Skipped reports whether a query event's statement is one that is never
// replayed, and its kind. A statement that Skipped does not match is left
// to the caller's DDL handling.
func Skipped(query string) (Kind, bool) {
	q := strings.TrimLeft(normalize(query), " \t\r\n(")
	for _, p := range patterns {
		if p.re.MatchString(q) {
			return p.kind, true
		}
	}
	return "", false
}

// Stored reports whether kind is a stored program (trigger, procedure,
// function, event, package): the writes it makes on the source are in the
// binlog as rows.
func (k Kind) Stored() bool {
	switch k {
	case Trigger, Procedure, Function, Event, Package:
		return true
	}
	return false
}

// headLen bounds how much of a statement normalize looks at: every
// pattern matches within its first few words.
const headLen = 1024

// normalize returns the head of a statement with comments removed: plain
// comments (/* */, -- and #) go, executable comments (/*!NNNNN ... */,
// /*M!NNNNN ... */, which mariadb-dump writes around CREATE TRIGGER and
// CREATE VIEW) keep their content. Quoted text is copied as it is.
func normalize(q string) string {
	if len(q) > headLen {
		q = q[:headLen]
	}
	var b strings.Builder
	inExec := false
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '`' || c == '\'' || c == '"':
			end := strings.IndexByte(q[i+1:], c)
			if end < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+end+2])
			i += end + 2
		case strings.HasPrefix(q[i:], "/*!") || strings.HasPrefix(q[i:], "/*M!"):
			i += strings.IndexByte(q[i:], '!') + 1
			for i < len(q) && q[i] >= '0' && q[i] <= '9' {
				i++
			}
			inExec = true
			b.WriteByte(' ')
		case inExec && strings.HasPrefix(q[i:], "*/"):
			inExec = false
			i += 2
			b.WriteByte(' ')
		case strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return b.String()
			}
			i += end + 4
			b.WriteByte(' ')
		case lineComment(q[i:]):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				return b.String()
			}
			i += end + 1
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// lineComment reports whether s starts a comment that runs to the end of
// the line: # or "-- " (two dashes and white space, as the server reads it).
func lineComment(s string) bool {
	if s[0] == '#' {
		return true
	}
	return len(s) >= 3 && s[0] == '-' && s[1] == '-' && strings.IndexByte(" \t\r\n", s[2]) >= 0
}
