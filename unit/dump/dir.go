package dump

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/fsutil"
	"github.com/dmworker/dm-worker/unit/dumpfile"
)

// ourFile matches the names the dump writes into its directory: the
// manifest and chunk files, finished or still being written.
var ourFile = regexp.MustCompile(`^(` + regexp.QuoteMeta(dumpfile.ManifestName) + `|t[0-9]{5}\.[0-9]{6}\.tsv)(` +
	regexp.QuoteMeta(dumpfile.TmpSuffix) + `)?$`)

// makeDir creates dir (0750) if it is missing.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return errs.New(CodeDumpDir, false, "dump: create the dump directory %s: %w; fix its parent's permissions or set loader.dir", dir, err)
	}
	return nil
}

// finishedDump returns dir's manifest when it holds the finished dump of
// this task and source with fingerprint fp (and, when strict, the source's
// default collations). Otherwise it returns nil and why the directory's
// contents cannot be used ("" for an empty directory). A manifest of
// another task or source is an error: the directory is shared.
func finishedDump(dir, task, source, fp string, strict bool) (m *dumpfile.Manifest, why string, err error) {
	m, err = dumpfile.ReadManifest(dir)
	switch {
	case errors.Is(err, dumpfile.ErrNoManifest):
		names, lerr := ourNames(dir)
		if lerr != nil {
			return nil, "", lerr
		}
		if len(names) > 0 {
			return nil, "the directory holds chunk files but no manifest: the last dump was interrupted", nil
		}
		return nil, "", nil
	case err != nil:
		return nil, fmt.Sprintf("the manifest cannot be used (%v)", err), nil
	}
	if m.Task != task || m.Source != source {
		return nil, "", errs.New(CodeDumpDir, false,
			"dump: %s holds the dump of task %q source %q, not of task %q source %q: two subtasks share the directory; "+
				"give each its own loader.dir, or empty %s", dir, m.Task, m.Source, task, source, dir)
	}
	if m.Fingerprint != fp {
		return nil, fmt.Sprintf("%s since dump %s; discarding it and dumping again", fingerprintChange(m.Fingerprint, fp), m.DumpID), nil
	}
	if strict && m.Collations == nil {
		return nil, fmt.Sprintf("dump %s does not record the source's default collations (an older dm-worker wrote it), "+
			"which collation_compatible strict needs; dumping again", m.DumpID), nil
	}
	if why := missingChunk(dir, m); why != "" {
		return nil, why, nil
	}
	return m, "", nil
}

// missingChunk says which chunk file of m is missing or has another size
// than the manifest says ("" when every one is whole).
func missingChunk(dir string, m *dumpfile.Manifest) string {
	for _, t := range m.Tables {
		for _, c := range t.Chunks {
			info, err := os.Stat(filepath.Join(dir, c.File))
			if err != nil {
				return fmt.Sprintf("chunk file %s of dump %s cannot be used (%v); dumping again", c.File, m.DumpID, err)
			}
			if info.Size() != c.Bytes {
				return fmt.Sprintf("chunk file %s of dump %s has %d bytes, the manifest says %d; dumping again", c.File, m.DumpID, info.Size(), c.Bytes)
			}
		}
	}
	return ""
}

// ourNames lists dir's files that the dump writes; a file or directory it
// does not write is an error naming it.
func ourNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.New(CodeDumpDir, false, "dump: read the dump directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !ourFile.MatchString(e.Name()) {
			return nil, errs.New(CodeDumpDir, false,
				"dump: the dump directory %s holds %s, which the dump did not write; empty the directory or set loader.dir to another one",
				dir, filepath.Join(dir, e.Name()))
		}
		names = append(names, e.Name())
	}
	return names, nil
}

// clearDir removes the dump's files from dir: the manifest first (made
// durable), so that a crash while removing never leaves a manifest whose
// chunks are gone.
func clearDir(dir string) error {
	names, err := ourNames(dir)
	if err != nil {
		return err
	}
	remove := func(name string) error {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errs.New(CodeDumpDir, false, "dump: remove %s: %w", filepath.Join(dir, name), err)
		}
		return nil
	}
	if err := remove(dumpfile.ManifestName); err != nil {
		return err
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return errs.New(CodeDumpDir, false, "dump: sync %s: %w", dir, err)
	}
	for _, n := range names {
		if n == dumpfile.ManifestName {
			continue
		}
		if err := remove(n); err != nil {
			return err
		}
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return errs.New(CodeDumpDir, false, "dump: sync %s: %w", dir, err)
	}
	return nil
}

// fingerprintChange says which parts of a fingerprint differ.
func fingerprintChange(old, cur string) string {
	changed := Changed(old, cur, FingerprintParts...)
	if len(changed) == 0 {
		return "the config the dump was taken with changed"
	}
	return strings.Join(changed, ", ") + " changed"
}

// Changed names the given parts (FingerprintParts; all of them when none
// is given) that differ between two fingerprints (see Fingerprint:
// "name=value" parts separated by ";"), as "the block-allow list".
func Changed(old, cur string, parts ...string) []string {
	split := func(fp string) map[string]string {
		m := map[string]string{}
		for _, p := range strings.Split(fp, ";") {
			k, v, _ := strings.Cut(p, "=")
			m[k] = v
		}
		return m
	}
	if len(parts) == 0 {
		parts = FingerprintParts
	}
	o, c := split(old), split(cur)
	var changed []string
	for _, k := range parts {
		if o[k] != c[k] {
			changed = append(changed, fingerprintNames[k])
		}
	}
	return changed
}
