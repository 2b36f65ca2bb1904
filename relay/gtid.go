package relay

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// gtidSet is the set of transactions executed up to a position. For
// MariaDB it keeps, like @@gtid_binlog_pos, the last GTID of each domain
// (sequence numbers grow within a domain, whichever server wrote them); for
// MySQL it is a uuid:interval set.
type gtidSet struct {
	mariadb bool
	domains map[uint32]gtid
	my      *mysql.MysqlGTIDSet
}

func newGTIDSet(mariadb bool) *gtidSet {
	if mariadb {
		return &gtidSet{mariadb: true, domains: make(map[uint32]gtid)}
	}
	return &gtidSet{my: &mysql.MysqlGTIDSet{Sets: make(map[string]*mysql.UUIDSet)}}
}

// parseGTIDSet parses a set in the flavor's text form; "" is the empty set.
func parseGTIDSet(mariadb bool, s string) (*gtidSet, error) {
	s = strings.TrimSpace(s)
	set := newGTIDSet(mariadb)
	if s == "" {
		return set, nil
	}
	if !mariadb {
		p, err := mysql.ParseMysqlGTIDSet(s)
		if err != nil {
			return nil, fmt.Errorf("relay: parse MySQL GTID set %q: %w", s, err)
		}
		set.my = p.(*mysql.MysqlGTIDSet)
		return set, nil
	}
	for _, part := range strings.Split(s, ",") {
		g, err := mysql.ParseMariadbGTID(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("relay: parse MariaDB GTID set %q: %w", s, err)
		}
		set.add(gtid{mariadb: true, domain: g.DomainID, serverID: g.ServerID, seq: g.SequenceNumber})
	}
	return set, nil
}

// add records g as executed.
func (s *gtidSet) add(g gtid) {
	if s.mariadb {
		if cur, ok := s.domains[g.domain]; !ok || g.seq >= cur.seq {
			s.domains[g.domain] = g
		}
		return
	}
	s.my.AddGTID(g.sid, g.gno)
}

// contains reports whether g is in the set.
func (s *gtidSet) contains(g gtid) bool {
	if s.mariadb {
		cur, ok := s.domains[g.domain]
		return ok && cur.seq >= g.seq
	}
	one := newGTIDSet(false)
	one.add(g)
	return s.my.Contain(one.my)
}

// containsSet reports whether every transaction of o is in s.
func (s *gtidSet) containsSet(o *gtidSet) bool {
	if s.mariadb != o.mariadb {
		return false
	}
	if s.mariadb {
		for _, g := range o.domains {
			if !s.contains(g) {
				return false
			}
		}
		return true
	}
	return s.my.Contain(o.my)
}

func (s *gtidSet) empty() bool {
	if s.mariadb {
		return len(s.domains) == 0
	}
	return s.my.IsEmpty()
}

func (s *gtidSet) clone() *gtidSet {
	c := newGTIDSet(s.mariadb)
	if s.mariadb {
		for d, g := range s.domains {
			c.domains[d] = g
		}
		return c
	}
	c.my = s.my.Clone().(*mysql.MysqlGTIDSet)
	return c
}

// String is the flavor's text form, domains in order for MariaDB.
func (s *gtidSet) String() string {
	if !s.mariadb {
		return s.my.String()
	}
	ds := make([]uint32, 0, len(s.domains))
	for d := range s.domains {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = s.domains[d].String()
	}
	return strings.Join(parts, ",")
}

// goMySQL converts the set for the binlog dump command (dumpGTID).
func (s *gtidSet) goMySQL() (mysql.GTIDSet, error) {
	if s.mariadb {
		return mysql.ParseMariadbGTIDSet(s.String())
	}
	return s.my.Clone(), nil
}
