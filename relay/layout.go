package relay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/fsutil"
)

// indexFile lists the relay subdirectories, oldest first.
const indexFile = "server-uuid.index"

// binlogFileRE matches binlog file names ("mariadb-bin.000012").
var binlogFileRE = regexp.MustCompile(`^.+\.[0-9]+$`)

// subdir is one relay subdirectory: the files relayed from one upstream
// server.
type subdir struct {
	Name   string // "<upstream-id>.<6-digit suffix>"
	UUID   string
	Suffix int
}

func parseSubdir(name string) (subdir, error) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return subdir{}, fmt.Errorf("relay: index entry %q is not <upstream-id>.<suffix>", name)
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n <= 0 {
		return subdir{}, fmt.Errorf("relay: index entry %q has no numeric suffix", name)
	}
	return subdir{Name: name, UUID: name[:i], Suffix: n}, nil
}

func subdirName(uuid string, suffix int) string { return fmt.Sprintf("%s.%06d", uuid, suffix) }

// readIndex returns the subdirectories listed in root's index.
func readIndex(root string) ([]subdir, error) {
	b, err := os.ReadFile(filepath.Join(root, indexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("relay: read index: %w", err)
	}
	var out []subdir
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		sd, err := parseSubdir(line)
		if err != nil {
			return nil, err
		}
		out = append(out, sd)
	}
	return out, nil
}

// addSubdir creates the next subdirectory for uuid and appends it to the
// index.
func addSubdir(root string, existing []subdir, uuid string) (subdir, error) {
	next := 1
	if len(existing) > 0 {
		next = existing[len(existing)-1].Suffix + 1
	}
	sd := subdir{Name: subdirName(uuid, next), UUID: uuid, Suffix: next}
	if err := os.MkdirAll(filepath.Join(root, sd.Name), dirMode); err != nil {
		return subdir{}, fmt.Errorf("relay: create subdirectory: %w", err)
	}
	if err := fsutil.SyncDir(root); err != nil {
		return subdir{}, err
	}
	var b strings.Builder
	for _, s := range append(existing, sd) {
		b.WriteString(s.Name)
		b.WriteByte('\n')
	}
	if err := writeFileAtomic(filepath.Join(root, indexFile), []byte(b.String())); err != nil {
		return subdir{}, err
	}
	return sd, nil
}

// listFiles returns the binlog files of a subdirectory in binlog order.
func listFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("relay: list %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && binlogFileRE.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return binlog.Location{Name: out[i]}.Compare(binlog.Location{Name: out[j]}) < 0
	})
	return out, nil
}

// relayFile is one file of the relay in global order: subdirectory index,
// then binlog order.
type relayFile struct {
	Dir   int    // index into the subdirectory list
	Sub   string // subdirectory name
	Name  string // binlog file name
	Path  string
	Order int // position in the global list
}

// before reports whether f comes before o in the relay.
func (f relayFile) before(o relayFile) bool {
	if f.Dir != o.Dir {
		return f.Dir < o.Dir
	}
	return binlog.Location{Name: f.Name}.Compare(binlog.Location{Name: o.Name}) < 0
}

// allFiles lists every relay file in order.
func allFiles(root string) ([]relayFile, error) {
	subs, err := readIndex(root)
	if err != nil {
		return nil, err
	}
	var out []relayFile
	for i, sd := range subs {
		names, err := listFiles(filepath.Join(root, sd.Name))
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out = append(out, relayFile{Dir: i, Sub: sd.Name, Name: n, Path: filepath.Join(root, sd.Name, n), Order: len(out)})
		}
	}
	return out, nil
}

// findFile returns the file holding a source binlog name: the newest
// subdirectory that has it. A source binlog name alone cannot tell two
// upstream servers apart; consumers that cross an upstream switch use GTIDs.
func findFile(files []relayFile, name string) (relayFile, bool) {
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].Name == name {
			return files[i], true
		}
	}
	return relayFile{}, false
}
