package load

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// collations returns the source's default collations the dump m recorded
// when the subtask is collation_compatible strict (nil when loose).
func (l *Loader) collations(m *dumpfile.Manifest) (*collation.Defaults, error) {
	if !l.cfg.StrictCollation() {
		return nil, nil
	}
	if m.Collations == nil {
		return nil, errs.New(CodeLoadDump, false, "load: dump %s in %s does not record the source's default collations "+
			"(an older dm-worker wrote it), which collation_compatible strict needs; remove the dump's files so that the dump "+
			"unit runs again (clean the target tables of the task and restart it with `dmctl task start --remove-meta`), or use loose",
			m.DumpID, l.dir)
	}
	return m.Collations, nil
}

// adjustCollations writes the source's defaults into a statement of the
// load (collation_compatible strict; nothing when loose) and reports
// whether it changed; orig is the dumped text, for the log.
func (l *Loader) adjustCollations(node ast.StmtNode, orig string) bool {
	if l.coll == nil {
		return false
	}
	changed, unknown := l.coll.Adjust(node)
	if len(unknown) > 0 {
		l.logger.Warn("collation_compatible strict: the source has no default collation for a character set the dumped statement names; that part runs as written",
			zap.Strings("charsets", unknown), zap.String("sql", orig))
	}
	return changed
}

// adjustCreateTable returns q, a CREATE TABLE for the target, with the
// source's default collations written in. The text stays the server's
// when nothing is missing (MariaDB and MySQL 8 print every collation),
// since the parser's restored text drops options only MariaDB knows, and
// when the parser cannot read it (MariaDB-only syntax: such a server
// printed every collation), as in DM.
func (l *Loader) adjustCreateTable(p *parser.Parser, q string) (string, error) {
	stmt, err := p.ParseOneStmt(q, "", "")
	if err != nil {
		l.logger.Warn("collation_compatible strict: the parser cannot read the dumped CREATE TABLE; it runs as the source printed it",
			zap.String("sql", q), zap.Error(err))
		return q, nil
	}
	if !l.adjustCollations(stmt, q) {
		return q, nil
	}
	var b strings.Builder
	if err := stmt.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return "", fmt.Errorf("restore the CREATE TABLE with the source's default collations: %w", err)
	}
	return b.String(), nil
}
