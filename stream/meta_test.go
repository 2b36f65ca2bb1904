package stream

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
)

// noLeaks checks, when the test ends, that it left no goroutine behind.
func noLeaks(t *testing.T, opts ...goleak.Option) {
	t.Helper()
	opts = append(opts, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// streamConfig returns a decoded, valid config of stream name.
func streamConfig(t *testing.T, name string) *config.StreamConfig {
	t.Helper()
	cfg, err := config.ParseStreamConfig([]byte(fmt.Sprintf(`
name: %s
source-id: mysql-01
snapshot: true
block-allow-list: {do-dbs: [shop], ignore-tables: [{db-name: shop, tbl-name: "tmp_*"}]}
format: canal-json
sink: {type: file, file: {dir: /var/lib/cdc/%s, rotate-size: 1MiB}}
`, name, name)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func testRecord(t *testing.T, name string) Record {
	return Record{
		Name:      name,
		Config:    streamConfig(t, name),
		ConfigRev: 41,
		State:     StateFillHistory,
		Checkpoint: Checkpoint{
			Location: binlog.Location{Name: "mariadb-bin.000003", Pos: 1234, GTID: "0-1-900"},
			Snapshot: map[string]TableProgress{
				"shop.orders": {Cursor: []string{"7", "a\x00b"}, Rows: 7},
				"shop.items":  {Done: true, Rows: 100},
			},
			Time: time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC),
		},
	}
}

func openMeta(t *testing.T, path string, opts ...MetaOption) *Meta {
	t.Helper()
	m, err := OpenMeta(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

// equalRecords compares records; configs compare by their JSON (Notes
// are not stored).
func equalRecords(t *testing.T, got, want Record) {
	t.Helper()
	gj, err := got.Config.JSON()
	if err != nil {
		t.Fatal(err)
	}
	wj, err := want.Config.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gj, wj) {
		t.Errorf("config of %s:\n got %s\nwant %s", want.Name, gj, wj)
	}
	got.Config, want.Config = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("record of %s:\n got %+v\nwant %+v", want.Name, got, want)
	}
}

func TestMetaRoundtrip(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "data", "stream", "meta.db")
	m := openMeta(t, path)
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("directory of the store: %v, %v; want mode 0750", fi, err)
	}

	if _, found, err := m.Get("s1"); found || err != nil {
		t.Fatalf("Get on an empty store: found %v, err %v", found, err)
	}
	if recs, err := m.List(); len(recs) != 0 || err != nil {
		t.Fatalf("List on an empty store: %v, %v", recs, err)
	}

	want := map[string]Record{}
	for _, name := range []string{"s2", "s1", "a.b-c_d"} {
		r := testRecord(t, name)
		if err := m.Put(r); err != nil {
			t.Fatal(err)
		}
		want[name] = r
	}
	for name, w := range want {
		got, found, err := m.Get(name)
		if err != nil || !found {
			t.Fatalf("Get(%s): found %v, err %v", name, found, err)
		}
		equalRecords(t, got, w)
	}
	recs, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
		equalRecords(t, r, want[r.Name])
	}
	if strings.Join(names, ",") != "a.b-c_d,s1,s2" {
		t.Errorf("List order: %v, want sorted by name", names)
	}

	// Replace, then change the checkpoint and the state alone.
	r := want["s1"]
	r.ConfigRev, r.State = 50, StateChecking
	r.Config.Sink.File.Dir = "/elsewhere"
	if err := m.Put(r); err != nil {
		t.Fatal(err)
	}
	cp := Checkpoint{Location: binlog.Location{Name: "mariadb-bin.000004", Pos: 4}, SnapshotDone: true, Time: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	if err := m.SaveCheckpoint("s1", cp); err != nil {
		t.Fatal(err)
	}
	if err := m.SetState("s1", StatePaused); err != nil {
		t.Fatal(err)
	}
	r.Checkpoint, r.State = cp, StatePaused
	got, _, err := m.Get("s1")
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, r)

	if err := m.Drop("s1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Drop("s1"); err != nil {
		t.Fatalf("Drop of a dropped stream: %v", err)
	}
	if _, found, err := m.Get("s1"); found || err != nil {
		t.Fatalf("Get after Drop: found %v, err %v", found, err)
	}
}

func TestMetaRefusals(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "meta.db")
	m := openMeta(t, path)
	if err := m.Put(testRecord(t, "s1")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"checkpoint of a missing stream", m.SaveCheckpoint("nope", Checkpoint{}), "no meta record"},
		{"state of a missing stream", m.SetState("nope", StatePaused), "no meta record"},
		{"unknown state", m.SetState("s1", "running"), `state "running" is not one of`},
		{"bad name", m.Put(Record{Name: "bad/name", Config: streamConfig(t, "s1"), State: StateChecking}), "bad/name"},
		{"no config", m.Put(Record{Name: "s3", State: StateChecking}), "no config"},
		{"other stream's config", m.Put(Record{Name: "s3", Config: streamConfig(t, "s1"), State: StateChecking}), `config is of stream "s1"`},
		{"empty state", m.Put(Record{Name: "s1", Config: streamConfig(t, "s1")}), `state "" is not one of`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) || !strings.Contains(tc.err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", tc.name, tc.err, path, tc.want)
		}
	}
	if err := m.SaveCheckpoint("nope", Checkpoint{}); !errors.Is(err, ErrNoRecord) {
		t.Errorf("SaveCheckpoint of a missing stream: %v, want ErrNoRecord", err)
	}
	got, _, err := m.Get("s1")
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, testRecord(t, "s1")) // nothing refused changed it
}

func TestMetaDurableAcrossReopen(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "meta.db")
	m, err := OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	r := testRecord(t, "s1")
	if err := m.Put(r); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(testRecord(t, "s2")); err != nil {
		t.Fatal(err)
	}
	r.Checkpoint.Location.Pos = 999
	if err := m.SaveCheckpoint("s1", r.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if err := m.Drop("s2"); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m = openMeta(t, path)
	recs, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("after reopen: %d records, want s1 alone", len(recs))
	}
	equalRecords(t, recs[0], r)
}

func TestMetaConcurrentUse(t *testing.T) {
	noLeaks(t)
	m := openMeta(t, filepath.Join(t.TempDir(), "meta.db"))
	const streams, rounds = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, streams*4)
	for i := range streams {
		name := fmt.Sprintf("s%d", i)
		if err := m.Put(testRecord(t, name)); err != nil {
			t.Fatal(err)
		}
		wg.Add(3)
		go func() { // checkpoints
			defer wg.Done()
			for n := range rounds {
				cp := Checkpoint{Location: binlog.Location{Name: "mariadb-bin.000001", Pos: uint32(n + 1)}}
				if err := m.SaveCheckpoint(name, cp); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // states
			defer wg.Done()
			for n := range rounds {
				if err := m.SetState(name, validStates[n%len(validStates)]); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // readers
			defer wg.Done()
			for range rounds {
				if _, found, err := m.Get(name); err != nil || !found {
					errs <- fmt.Errorf("Get(%s): found %v, err %v", name, found, err)
					return
				}
				if recs, err := m.List(); err != nil || len(recs) < i+1 {
					errs <- fmt.Errorf("List: %d records, err %v", len(recs), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		// The last writes of both writers of the stream won: neither
		// overwrote the other's field with a stale value.
		if r.Checkpoint.Location.Pos != rounds || r.State != validStates[(rounds-1)%len(validStates)] {
			t.Errorf("%s: checkpoint pos %d state %s, want %d and %s", r.Name, r.Checkpoint.Location.Pos, r.State, rounds, validStates[(rounds-1)%len(validStates)])
		}
	}
}

func TestMetaLocked(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "meta.db")
	openMeta(t, path)
	began := time.Now()
	m, err := OpenMeta(path, WithLockTimeout(200*time.Millisecond))
	if err == nil {
		_ = m.Close()
		t.Fatal("a second OpenMeta of a file held open succeeded")
	}
	if !errors.Is(err, ErrMetaLocked) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("error %v, want ErrMetaLocked naming %s", err, path)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("OpenMeta gave up after %v, want about the 200ms lock timeout", d)
	}
	t.Logf("locked: %v", err)
}

// writeStore creates a store at path with n records and returns its bytes.
func writeStore(t *testing.T, path string, n int) []byte {
	t.Helper()
	m, err := OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := testRecord(t, fmt.Sprintf("stream-%03d", i))
		for j := range 20 { // make records span pages
			r.Checkpoint.Snapshot[fmt.Sprintf("shop.t%02d", j)] = TableProgress{Cursor: []string{strings.Repeat("k", 30)}, Rows: int64(j)}
		}
		if err := m.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wantCorrupt checks that err is an open error of a corrupt file at path.
func wantCorrupt(t *testing.T, what, path string, m *Meta, err error) {
	t.Helper()
	if err == nil {
		_ = m.Close()
		t.Errorf("%s: OpenMeta succeeded, want ErrMetaCorrupt", what)
		return
	}
	if !errors.Is(err, ErrMetaCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move the file aside") {
		t.Errorf("%s: error %v, want ErrMetaCorrupt naming %s and saying to move it aside", what, err, path)
	}
}

func TestMetaCorruptFile(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	good := writeStore(t, filepath.Join(dir, "good.db"), 60)
	const pageSize = 4096
	if len(good) < 6*pageSize {
		t.Fatalf("the store is %d bytes, want several pages", len(good))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 3*pageSize)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}

	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"garbage", garbage},
		{"short garbage", []byte("not a bbolt file\n")},
		{"truncated to half", good[:len(good)/2]},
		{"truncated mid-page", good[:3*pageSize+100]},
		{"truncated to the meta pages", good[:2*pageSize]},
		{"both meta pages zeroed", append(make([]byte, 2*pageSize), good[2*pageSize:]...)},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".db")
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := OpenMeta(path)
		wantCorrupt(t, tc.name, path, m, err)
		if err != nil && tc.name == "garbage" {
			t.Logf("corrupt: %v", err)
		}
	}
}

// TestMetaDamagedPages overwrites each page of a store in turn with
// garbage: OpenMeta either refuses the file as corrupt or opens it, and
// then every read either works or fails with an error; nothing panics or
// faults.
func TestMetaDamagedPages(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	good := writeStore(t, filepath.Join(dir, "good.db"), 30)
	const pageSize = 4096
	rng := rand.New(rand.NewPCG(3, 4))
	refused, records := 0, 0
	for page := range len(good) / pageSize {
		data := bytes.Clone(good)
		for i := page * pageSize; i < (page+1)*pageSize; i++ {
			data[i] = byte(rng.UintN(256))
		}
		path := filepath.Join(dir, fmt.Sprintf("page%d.db", page))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := OpenMeta(path)
		if err != nil {
			wantCorrupt(t, fmt.Sprintf("page %d", page), path, nil, err)
			refused++
			continue
		}
		// Opened: the damage hit a page the check does not judge (a free
		// page, a record's value, one of the two meta pages, which bbolt
		// falls back from). Reads and writes then work or fail with an
		// error of the store; a damaged value affects its stream alone.
		if _, err := m.List(); err != nil {
			if !errors.Is(err, ErrRecordCorrupt) && !errors.Is(err, ErrMetaCorrupt) {
				t.Errorf("page %d: List: %v, want a record or store corruption error", page, err)
			}
			records++
		}
		if err := m.Put(testRecord(t, "after")); err != nil && !errors.Is(err, ErrMetaCorrupt) {
			t.Errorf("page %d: Put: %v", page, err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("page %d: close: %v", page, err)
		}
	}
	if refused == 0 {
		t.Errorf("no damaged page made OpenMeta refuse the file")
	}
	t.Logf("of %d damaged pages, %d refused at open, %d reported as corrupt records by List", len(good)/pageSize, refused, records)
}

// TestMetaCorruptRecord: a record whose JSON is damaged affects only its
// stream.
func TestMetaCorruptRecord(t *testing.T) {
	noLeaks(t)
	path := filepath.Join(t.TempDir(), "meta.db")
	writeStore(t, path, 3)
	// Damage stream-001's record and add one under an impossible name.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(streamsBucket)
		if err := b.Put([]byte("stream-001"), []byte(`{"format":1,"name":"stream-001","con`)); err != nil {
			return err
		}
		return b.Put([]byte("stream-002"), []byte(`{"format":99,"name":"stream-002"}`))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	m := openMeta(t, path)
	recs, err := m.List()
	var re *RecordErrors
	if !errors.As(err, &re) || len(re.Errors) != 2 || !errors.Is(err, ErrRecordCorrupt) {
		t.Fatalf("List: %v, want a *RecordErrors of stream-001 and stream-002", err)
	}
	if len(recs) != 1 || recs[0].Name != "stream-000" {
		t.Fatalf("List returned %d records, want stream-000 alone", len(recs))
	}
	for i, name := range []string{"stream-001", "stream-002"} {
		if re.Errors[i].Stream != name || !strings.Contains(re.Errors[i].Error(), path) {
			t.Errorf("record error %d: %v, want one of %s naming %s", i, re.Errors[i], name, path)
		}
	}
	if !strings.Contains(re.Errors[1].Error(), "newer dm-worker") {
		t.Errorf("format 99: %v, want it to say a newer dm-worker wrote it", re.Errors[1])
	}
	if _, found, err := m.Get("stream-001"); !found || !errors.Is(err, ErrRecordCorrupt) {
		t.Errorf("Get of the corrupt record: found %v, err %v", found, err)
	}
	if err := m.SaveCheckpoint("stream-001", Checkpoint{}); !errors.Is(err, ErrRecordCorrupt) {
		t.Errorf("SaveCheckpoint of the corrupt record: %v", err)
	}
	if err := m.SaveCheckpoint("stream-000", Checkpoint{SnapshotDone: true}); err != nil {
		t.Errorf("SaveCheckpoint of a sound record beside it: %v", err)
	}
	t.Logf("record: %v", re.Errors[0])
	for _, name := range []string{"stream-001", "stream-002"} {
		if err := m.Drop(name); err != nil {
			t.Fatal(err)
		}
	}
	if recs, err := m.List(); err != nil || len(recs) != 1 {
		t.Errorf("after dropping the corrupt records: %d records, %v", len(recs), err)
	}
}
