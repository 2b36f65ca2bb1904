package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dmworker/dm-worker/tests/cdctest"
	"github.com/dmworker/dm-worker/tests/mariadbtest"
)

// What the stream tests do with a sink's events: read them back (the file
// sink's JSON lines in sequence order, or a JetStream stream in stream
// order) and apply them to an empty copy of each source table, so that
// CHECKSUM TABLE can say whether the events reproduce the source.

// fileSinkName matches a file sink's files of one stream; group 1 is the
// sequence number.
func fileSinkName(stream string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(stream) + `\.([0-9]{6,})\.jsonl$`)
}

// readFileSink reads every event the file sink of stream wrote into dir, in
// sequence order. A file ending in a torn line (no newline) is an error:
// the sink cuts such a line off before it writes again, so none may be
// left once a stream caught up.
func readFileSink(dir, stream string) ([]cdctest.Event, error) {
	var out []cdctest.Event
	err := eachFileSinkEvent(dir, stream, func(ev cdctest.Event) error {
		out = append(out, ev)
		return nil
	})
	return out, err
}

// eachFileSinkEvent calls fn with every event the file sink of stream
// wrote into dir, in sequence order, holding one file in memory at a time;
// a torn line is an error as in readFileSink.
func eachFileSinkEvent(dir, stream string, fn func(cdctest.Event) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("file sink of stream %s: %w", stream, err)
	}
	re := fileSinkName(stream)
	type file struct {
		seq  int
		path string
	}
	var files []file
	for _, e := range entries {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		seq, err := strconv.Atoi(m[1])
		if err != nil {
			return fmt.Errorf("file sink name %s: %w", e.Name(), err)
		}
		files = append(files, file{seq, filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(files, func(a, b file) int { return a.seq - b.seq })
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			return fmt.Errorf("%s ends with a torn line (%d bytes without a newline)", f.path, len(data)-bytes.LastIndexByte(data, '\n')-1)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for line := 1; sc.Scan(); line++ {
			ev, err := cdctest.Decode(sc.Bytes())
			if err != nil {
				return fmt.Errorf("%s line %d: %w", f.path, line, err)
			}
			if err := fn(ev); err != nil {
				return fmt.Errorf("%s line %d: %w", f.path, line, err)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
	}
	return nil
}

// countFileSinkLines counts the lines the file sink of stream wrote into
// dir (cheaper than decoding them).
func countFileSinkLines(dir, stream string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	re := fileSinkName(stream)
	n := 0
	for _, e := range entries {
		if !re.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		n += bytes.Count(data, []byte{'\n'})
	}
	return n, nil
}

// readNATSSink reads every message of the JetStream stream that takes
// subject.> on the server at url, in stream order, each with its
// Nats-Msg-Id.
func readNATSSink(ctx context.Context, url, subject string) ([]cdctest.Event, error) {
	nc, err := nats.Connect(url, nats.Name("e2e sink reader"))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	name, err := js.StreamNameBySubject(ctx, subject+".>")
	if err != nil {
		return nil, fmt.Errorf("the JetStream stream of %s.>: %w", subject, err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	want := int(info.State.Msgs)
	if want == 0 {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer on %s: %w", name, err)
	}
	out := make([]cdctest.Event, 0, want)
	for len(out) < want {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %d of %d messages: %w", name, len(out), want, err)
		}
		batch, err := cons.Fetch(min(1000, want-len(out)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch from %s: %w", name, err)
		}
		for m := range batch.Messages() {
			ev, err := cdctest.Decode(m.Data())
			if err != nil {
				return nil, fmt.Errorf("%s message %d: %w", name, len(out)+1, err)
			}
			ev.ID = m.Headers().Get(jetstream.MsgIDHeader)
			out = append(out, ev)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("fetch from %s: %w", name, err)
		}
	}
	return out, nil
}

// duplicateIDs returns the identities that occur more than once (and
// whether some event had none).
func duplicateIDs(events []cdctest.Event) (dups []string, missing int) {
	seen := make(map[string]int, len(events))
	for _, ev := range events {
		if ev.ID == "" {
			missing++
			continue
		}
		seen[ev.ID]++
		if seen[ev.ID] == 2 {
			dups = append(dups, ev.ID)
		}
	}
	return dups, missing
}

// copyPool opens a pool to the copy instance with client-side
// interpolation of arguments (one round trip per statement).
func copyPool(t *testing.T, in *mariadbtest.Instance) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(in.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close the copy pool: %v", err)
		}
	})
	return db
}

// tableChecksums returns CHECKSUM TABLE of each "db.table" of tables, read
// in db under the database of each name, or under inDB when it is set.
func tableChecksums(ctx context.Context, db *sql.DB, inDB string, tables []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range tables {
		q := name
		if inDB != "" {
			_, table, _ := strings.Cut(name, ".")
			q = inDB + "." + table
		}
		var n string
		var sum sql.NullString
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+q).Scan(&n, &sum); err != nil {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: %w", q, err)
		}
		if !sum.Valid {
			return nil, fmt.Errorf("CHECKSUM TABLE %s: NULL (no such table)", q)
		}
		out[name] = sum.String
	}
	return out, nil
}
