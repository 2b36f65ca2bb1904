package syncer

import (
	"context"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/pkg/collation"
	"github.com/dmworker/dm-worker/pkg/errs"
)

// readCollations reads the source's collations for collation_compatible:
// strict (nil when the subtask is loose), once per run, so that a run
// sees the source's settings as they are when it starts; each DDL then
// applies the session settings its query event carries (ddlApplier.apply).
func (s *Syncer) readCollations(ctx context.Context) (*collation.Catalog, error) {
	if !s.cfg.StrictCollation() {
		return nil, nil
	}
	// One connection from the worker's source budget, for the time of the
	// read.
	db, err := s.sources.Open(s.source, s.source.DriverConfig(), s.cfg.Name, 1)
	if err != nil {
		return nil, errs.Wrap(err, CodeCollation, "sync: collation_compatible strict: connect to source %s", s.cfg.SourceID)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			s.logger.Warn("close source pool", zap.Error(cerr))
		}
	}()
	c, err := collation.Read(ctx, db)
	if err != nil {
		// A source that cannot be read now may be readable on resume.
		return nil, errs.Wrap(err, CodeCollation, "sync: collation_compatible strict: read the default collations of source %s", s.cfg.SourceID)
	}
	s.logger.Info("collation_compatible strict: CREATE and ALTER statements without a collation get the source's default",
		zap.String("collation-server", c.Global.Server), zap.Int("charsets", len(c.Global.Charsets)))
	return c, nil
}
