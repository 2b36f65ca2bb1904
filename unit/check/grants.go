package check

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/dmworker/dm-worker/pkg/sqlschema"
)

// grant is one privilege line of SHOW GRANTS: privileges on a level.
type grant struct {
	privs map[string]bool // upper case, single spaces; column-level ones are not in it
	all   bool            // ALL [PRIVILEGES]
	// db is "*" for *.* and otherwise a LIKE pattern (grants on `d\_b%`.*
	// name every database the pattern matches); table is "*" for db.*.
	db, table string
}

// grants are the privileges of the source user, its active role included.
type grants struct {
	user  string // CURRENT_USER() as 'user'@'host', for the fix statements
	lines []grant
	// roles are roles granted to the user whose privileges are not in
	// lines (MySQL roles that are not active).
	roles []string
}

var (
	privLine = regexp.MustCompile(`(?is)^GRANT (.+?) ON (.+?) TO `)
	roleLine = regexp.MustCompile("(?is)^GRANT (`[^`]*`(@`[^`]*`)?(, *`[^`]*`(@`[^`]*`)?)*) TO ")
)

// readGrants reads SHOW GRANTS (MariaDB includes the active role's
// privileges; on MySQL the active roles are expanded with USING).
func readGrants(ctx context.Context, db *sql.DB, mariadb bool) (*grants, error) {
	g := &grants{}
	var user string
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&user); err != nil {
		return nil, fmt.Errorf("SELECT CURRENT_USER(): %w", err)
	}
	g.user = quoteAccount(user)
	query := "SHOW GRANTS"
	if !mariadb {
		var role sql.NullString
		// CURRENT_ROLE() is MySQL 8's; older servers have no roles.
		if err := db.QueryRowContext(ctx, "SELECT CURRENT_ROLE()").Scan(&role); err == nil &&
			role.Valid && role.String != "" && role.String != "NONE" {
			query = "SHOW GRANTS FOR CURRENT_USER() USING " + role.String
		}
	}
	lines, err := sqlschema.QueryStrings(ctx, db, query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", query, err)
	}
	for _, l := range lines {
		g.add(l)
	}
	return g, nil
}

// add parses one line of SHOW GRANTS; lines it does not understand
// (PROXY, procedures, SET DEFAULT ROLE) grant nothing here.
func (g *grants) add(line string) {
	if m := privLine.FindStringSubmatch(line); m != nil {
		db, table, ok := parseLevel(m[2])
		if !ok {
			return
		}
		gr := grant{privs: map[string]bool{}, db: db, table: table}
		for _, p := range splitPrivs(m[1]) {
			switch {
			case p == "ALL" || p == "ALL PRIVILEGES":
				gr.all = true
			case !strings.Contains(p, "("):
				gr.privs[p] = true
			}
		}
		g.lines = append(g.lines, gr)
		return
	}
	if m := roleLine.FindStringSubmatch(line); m != nil {
		g.roles = append(g.roles, m[1])
	}
}

// splitPrivs splits a privilege list at the commas outside column lists
// and normalises each privilege (upper case, single spaces).
func splitPrivs(list string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range list {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, list[start:i])
				start = i + 1
			}
		}
	}
	out = append(out, list[start:])
	for i, p := range out {
		out[i] = strings.ToUpper(strings.Join(strings.Fields(p), " "))
	}
	return out
}

// parseLevel parses the level of a grant: *.*, `db`.*, `db`.`t` (maybe
// after TABLE). Routines and proxies are not levels tables use.
func parseLevel(s string) (db, table string, ok bool) {
	s = strings.TrimSpace(s)
	if rest, found := strings.CutPrefix(strings.ToUpper(s), "TABLE "); found {
		s = s[len(s)-len(rest):]
	}
	up := strings.ToUpper(s)
	if strings.HasPrefix(up, "PROCEDURE ") || strings.HasPrefix(up, "FUNCTION ") || strings.HasPrefix(up, "PACKAGE ") {
		return "", "", false
	}
	db, rest, ok := ident(s)
	if !ok || !strings.HasPrefix(rest, ".") {
		return "", "", false
	}
	table, rest, ok = ident(rest[1:])
	if !ok || rest != "" {
		return "", "", false
	}
	return db, table, true
}

// ident reads one identifier (backquoted, or bare up to a dot) from s.
func ident(s string) (name, rest string, ok bool) {
	if !strings.HasPrefix(s, "`") {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return s, "", s != ""
		}
		return s[:i], s[i:], i > 0
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '`' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '`' {
			b.WriteByte('`')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false
}

// global reports whether one of privs is granted on *.*.
func (g *grants) global(privs ...string) bool {
	for _, gr := range g.lines {
		if gr.db != "*" {
			continue
		}
		if gr.all {
			return true
		}
		for _, p := range privs {
			if gr.privs[p] {
				return true
			}
		}
	}
	return false
}

// onTable reports whether priv is granted on schema.table by a global,
// database or table grant.
func (g *grants) onTable(priv, schema, table string) bool {
	for _, gr := range g.lines {
		if !gr.all && !gr.privs[priv] {
			continue
		}
		switch {
		case gr.db == "*":
			return true
		case gr.table == "*" && likeMatch(gr.db, schema):
			return true
		case gr.db == schema && gr.table == table:
			return true
		}
	}
	return false
}

// likeMatch matches name against a database pattern of a grant: % any
// run, _ one character, \ escapes.
func likeMatch(pattern, name string) bool {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\' && i+1 < len(pattern):
			i++
			re.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		case c == '%':
			re.WriteString(".*")
		case c == '_':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	re.WriteString("$")
	ok, err := regexp.MatchString(re.String(), name)
	return err == nil && ok
}

// quoteAccount turns CURRENT_USER()'s user@host into 'user'@'host'.
func quoteAccount(s string) string {
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return quoteString(s)
	}
	return quoteString(s[:i]) + "@" + quoteString(s[i+1:])
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
