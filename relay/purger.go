package relay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/periodic"
)

// PurgeRequest selects the relay files to remove; exactly one field is set.
type PurgeRequest struct {
	// Inactive removes every file before the earliest file a reader or
	// blocker needs and before the active file.
	Inactive bool
	// Filename removes every file before this source binlog file.
	Filename string
	// Time removes every file last modified before it.
	Time *time.Time
}

// PurgeForbiddenError refuses a purge that would remove a file someone
// still needs.
type PurgeForbiddenError struct {
	Blocker string // "reader <name>" or the blocker's own name
	File    string // the first needed file the purge would remove
}

func (e *PurgeForbiddenError) Error() string {
	return fmt.Sprintf("relay purge would remove %s, which %s still needs; purge fewer files or let it move on first", e.File, e.Blocker)
}

// ErrFileNotFound is returned for a purge up to a file the relay does not
// hold.
var ErrFileNotFound = errors.New("relay: no such relay file")

// AddBlocker adds a source of positions that must not be purged.
func (r *Relay) AddBlocker(b Blocker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blockers = append(r.blockers, b)
}

// need is a file someone needs, and who.
type need struct {
	who  string
	file relayFile
}

// needs lists the files readers and blockers stand in; r.mu is held.
func (r *Relay) needs(files []relayFile) []need {
	var out []need
	for _, p := range r.readers {
		out = append(out, need{who: "reader " + p.reader, file: p.file})
	}
	for _, b := range r.blockers {
		who, loc, ok := b()
		if !ok || loc.Name == "" {
			continue
		}
		if f, found := findFile(files, loc.Name); found {
			out = append(out, need{who: who, file: f})
		} else if len(files) > 0 && (binlog.Location{Name: loc.Name}).Compare(binlog.Location{Name: files[0].Name}) < 0 {
			// Needs a file that is already gone: everything is needed.
			out = append(out, need{who: who, file: files[0]})
		}
	}
	return out
}

// Purge removes the relay files req selects and returns their names. A
// purge that would remove a file a registered reader or a blocker needs is
// refused with *PurgeForbiddenError and removes nothing; the active file is
// never removed.
func (r *Relay) Purge(ctx context.Context, req PurgeRequest) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	files, err := allFiles(r.cfg.Dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	last := files[len(files)-1] // the active file, or the one the writer resumes in
	needs := r.needs(files)
	var victims []relayFile
	switch {
	case req.Inactive:
		for _, f := range files {
			if f == last || blocked(f, needs) != nil {
				break
			}
			victims = append(victims, f)
		}
		return r.remove(victims)
	case req.Filename != "":
		upTo, ok := findFile(files, req.Filename)
		if !ok {
			return nil, fmt.Errorf("%w: %q (relay files: %s .. %s)", ErrFileNotFound, req.Filename, files[0].Name, last.Name)
		}
		for _, f := range files {
			if !f.before(upTo) {
				break
			}
			victims = append(victims, f)
		}
	case req.Time != nil:
		for _, f := range files {
			if f == last {
				break
			}
			st, err := os.Stat(f.Path)
			if err != nil {
				return nil, fmt.Errorf("relay: stat %s: %w", f.Path, err)
			}
			if st.ModTime().Before(*req.Time) {
				victims = append(victims, f)
			}
		}
	default:
		return nil, errors.New("relay: purge request selects nothing")
	}
	for _, f := range victims {
		if n := blocked(f, needs); n != nil {
			return nil, &PurgeForbiddenError{Blocker: n.who, File: f.Name}
		}
	}
	return r.remove(victims)
}

// blocked returns a need of f or of a file before it (a reader at an
// earlier file still needs every later one), if any.
func blocked(f relayFile, needs []need) *need {
	for i := range needs {
		if !f.before(needs[i].file) {
			return &needs[i]
		}
	}
	return nil
}

// remove deletes files; r.mu is held.
func (r *Relay) remove(files []relayFile) ([]string, error) {
	var names []string
	for _, f := range files {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return names, fmt.Errorf("relay: purge %s: %w", f.Path, err)
		}
		names = append(names, f.Name)
	}
	if len(names) > 0 {
		r.log.Info("relay files purged", zap.Strings("files", names))
		if m := r.cfg.Metrics; m != nil {
			m.PurgedFiles.WithLabelValues(r.source).Add(float64(len(names)))
		}
	}
	return names, nil
}

// RunPurger purges in the background every cfg.Interval seconds until ctx
// is done: files older than cfg.Expires hours, and the oldest files while
// the relay's file system has less than cfg.RemainSpace GB free; in both
// cases only files no reader or blocker needs. Interval 0 disables it.
func (r *Relay) RunPurger(ctx context.Context, cfg config.PurgeConfig) {
	if cfg.Interval <= 0 || (cfg.Expires <= 0 && cfg.RemainSpace <= 0) {
		<-ctx.Done()
		return
	}
	periodic.Run(ctx, time.Duration(cfg.Interval)*time.Second, periodic.AfterInterval, func(context.Context) {
		if err := r.purgeAuto(cfg); err != nil {
			r.log.Warn("background relay purge failed", zap.Error(err))
		}
	})
}

func (r *Relay) purgeAuto(cfg config.PurgeConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	files, err := allFiles(r.cfg.Dir)
	if err != nil || len(files) < 2 {
		return err
	}
	needs := r.needs(files)
	var eligible []relayFile
	for _, f := range files[:len(files)-1] {
		if blocked(f, needs) != nil {
			break
		}
		eligible = append(eligible, f)
	}
	var victims []relayFile
	if cfg.Expires > 0 {
		cutoff := r.cfg.Now().Add(-time.Duration(cfg.Expires) * time.Hour)
		for _, f := range eligible {
			if st, err := os.Stat(f.Path); err == nil && st.ModTime().Before(cutoff) {
				victims = append(victims, f)
			}
		}
		if _, err := r.remove(victims); err != nil {
			return err
		}
		kept := eligible[:0]
		for _, f := range eligible {
			if !slices.Contains(victims, f) {
				kept = append(kept, f)
			}
		}
		eligible = kept
	}
	if cfg.RemainSpace > 0 {
		want := uint64(cfg.RemainSpace) << 30
		for _, f := range eligible {
			var st syscall.Statfs_t
			if err := syscall.Statfs(r.cfg.Dir, &st); err != nil {
				return fmt.Errorf("relay: free space of %s: %w", r.cfg.Dir, err)
			}
			if st.Bavail*uint64(st.Bsize) >= want {
				break
			}
			if _, err := r.remove([]relayFile{f}); err != nil {
				return err
			}
		}
	}
	return nil
}
