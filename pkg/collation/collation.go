// Package collation is DM's collation_compatible: strict. It reads which
// collation a MySQL/MariaDB server gives a database, table or column whose
// statement names no collation (Read), and writes that collation into
// CREATE and ALTER statements that leave it out (Defaults.Adjust), so that
// a target whose own defaults differ ends with the source's collations.
//
// It holds no connections: Read queries through what the caller passes.
// It knows nothing of tasks, binlog events or dump files; the units decide
// which defaults apply to which statement.
package collation

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Defaults are the collations a server gives what a statement creates
// without naming a collation.
type Defaults struct {
	// Server is collation_server: a database created with neither a
	// character set nor a collation gets it.
	Server string `json:"server"`
	// Charsets maps each character set (lower case) to the collation it
	// gets when named without one: information_schema.COLLATIONS'
	// IS_DEFAULT, with MariaDB's character_set_collations and MySQL's
	// default_collation_for_utf8mb4 applied.
	Charsets map[string]string `json:"charsets"`
}

// Catalog is what Read learns of a server: its global defaults and every
// collation's id, to resolve the ids a binlog event's session carries.
type Catalog struct {
	Global Defaults
	// names maps a collation id to its name and character set.
	names map[uint16]named
}

type named struct{ name, charset string }

// Querier is what Read queries through (*sql.DB, *sql.Conn, *sql.Tx).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// errUnknownVariable is the server's ER_UNKNOWN_SYSTEM_VARIABLE: a
// variable this server version does not have.
const errUnknownVariable = 1193

// Read reads the server's collations and global defaults.
func Read(ctx context.Context, q Querier) (*Catalog, error) {
	rows, err := q.QueryContext(ctx, "SELECT COLLATION_NAME, CHARACTER_SET_NAME, ID, IS_DEFAULT FROM information_schema.COLLATIONS")
	if err != nil {
		return nil, fmt.Errorf("collation: read information_schema.COLLATIONS: %w", err)
	}
	c := &Catalog{Global: Defaults{Charsets: map[string]string{}}, names: map[uint16]named{}}
	for rows.Next() {
		// MariaDB 10.10+ also lists character-set-independent names
		// (uca1400_ai_ci) without a character set or id.
		var name, charset, isDefault sql.NullString
		var id sql.NullInt64
		if err := rows.Scan(&name, &charset, &id, &isDefault); err != nil {
			rows.Close()
			return nil, fmt.Errorf("collation: read information_schema.COLLATIONS: %w", err)
		}
		if !name.Valid || !charset.Valid {
			continue
		}
		cs := strings.ToLower(charset.String)
		if id.Valid && id.Int64 > 0 && id.Int64 <= 0xffff {
			c.names[uint16(id.Int64)] = named{name: strings.ToLower(name.String), charset: cs}
		}
		if strings.EqualFold(isDefault.String, "yes") {
			c.Global.Charsets[cs] = strings.ToLower(name.String)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("collation: read information_schema.COLLATIONS: %w", err)
	}
	if err := q.QueryRowContext(ctx, "SELECT @@global.collation_server").Scan(&c.Global.Server); err != nil {
		return nil, fmt.Errorf("collation: read collation_server: %w", err)
	}
	c.Global.Server = strings.ToLower(c.Global.Server)
	// MariaDB 11.2+: character_set_collations ("utf8mb4=utf8mb4_uca1400_ai_ci,...").
	overrides, err := optionalVariable(ctx, q, "character_set_collations")
	if err != nil {
		return nil, err
	}
	for _, pair := range strings.Split(overrides, ",") {
		cs, coll, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			continue
		}
		cs, coll = strings.ToLower(strings.TrimSpace(cs)), strings.ToLower(strings.TrimSpace(coll))
		if !strings.HasPrefix(coll, cs+"_") && coll != "binary" {
			coll = cs + "_" + coll // a character-set-independent name
		}
		c.Global.Charsets[cs] = coll
	}
	// MySQL 8: default_collation_for_utf8mb4.
	utf8mb4, err := optionalVariable(ctx, q, "default_collation_for_utf8mb4")
	if err != nil {
		return nil, err
	}
	if utf8mb4 != "" {
		c.Global.Charsets["utf8mb4"] = strings.ToLower(utf8mb4)
	}
	return c, nil
}

// optionalVariable reads a global variable that not every server version
// has ("" where it does not).
func optionalVariable(ctx context.Context, q Querier, name string) (string, error) {
	var v sql.NullString
	err := q.QueryRowContext(ctx, "SELECT @@global."+name).Scan(&v)
	var my *mysql.MySQLError
	if errors.As(err, &my) && my.Number == errUnknownVariable {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("collation: read %s: %w", name, err)
	}
	return v.String, nil
}

// Session returns the defaults of a session whose settings a binlog event
// carries as collation ids (0 or an id the catalog does not know: the
// global setting): collation_server, MySQL's default_collation_for_utf8mb4
// and MariaDB's character_set_collations.
func (c *Catalog) Session(server, utf8mb4 uint16, defaults []uint16) Defaults {
	d := Defaults{Server: c.Global.Server, Charsets: c.Global.Charsets}
	if n, ok := c.names[server]; ok {
		d.Server = n.name
	}
	var own map[string]string
	set := func(cs, coll string) {
		if d.Charsets[cs] == coll {
			return
		}
		if own == nil {
			own = make(map[string]string, len(d.Charsets))
			for k, v := range d.Charsets {
				own[k] = v
			}
			d.Charsets = own
		}
		own[cs] = coll
	}
	if n, ok := c.names[utf8mb4]; ok && n.charset == "utf8mb4" {
		set("utf8mb4", n.name)
	}
	for _, id := range defaults {
		if n, ok := c.names[id]; ok {
			set(n.charset, n.name)
		}
	}
	return d
}

// ForCharset returns the collation a character set named without one gets.
func (d Defaults) ForCharset(charset string) (string, bool) {
	coll, ok := d.Charsets[strings.ToLower(charset)]
	return coll, ok
}
