package relay

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

const chainSub = "mariadb-1-0.000001"

// chainFile is a MariaDB relay file whose transactions 0-1-(from+1) to
// 0-1-(from+groups) follow an optional Gtid_list 0-1-from, each with a row
// event of about 2 KiB, ending with the source's rotate event to next
// unless next is "".
func chainFile(from uint64, groups int, list bool, next string) *relayFileBuilder {
	b := newMariaFile()
	set := func(seq uint64) string { return fmt.Sprintf("0-1-%d", seq) }
	if list {
		b.event(replication.MARIADB_GTID_LIST_EVENT, 1, gtidListBody(0, 1, from))
		b.boundary(set(from))
	}
	for seq := from + 1; seq <= from+uint64(groups); seq++ {
		b.event(replication.MARIADB_GTID_EVENT, 1, mariaGTIDBody(seq, 0))
		b.event(replication.QUERY_EVENT, 1, queryBody("db", "BEGIN"))
		b.event(replication.TABLE_MAP_EVENT, 1, bytes.Repeat([]byte{1}, 20))
		b.event(replication.WRITE_ROWS_EVENTv1, 1, bytes.Repeat([]byte{byte(seq)}, 2000))
		b.event(replication.XID_EVENT, 1, binary.LittleEndian.AppendUint64(nil, seq))
		b.boundary(set(seq))
	}
	if next != "" {
		b.event(replication.ROTATE_EVENT, 1, append(binary.LittleEndian.AppendUint64(nil, magicSize), next...))
		b.boundary(set(from + uint64(groups)))
	}
	return b
}

// writeChain writes files (name, content) and meta m into a new relay
// directory and returns its root.
func writeChain(t *testing.T, files [][2]string, m Meta) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, chainSub)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, indexFile), []byte(chainSub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	return root
}

// checkRecovered checks that recovery of root resumes at name:end with
// set, that name holds want (a prefix of what it held), that the files in
// gone are removed, that the meta agrees, and that a second recovery
// changes nothing.
func checkRecovered(t *testing.T, root, name string, want []byte, set string, gone ...string) {
	t.Helper()
	dir := filepath.Join(root, chainSub)
	for i := 0; i < 2; i++ {
		rec, err := recoverDir(root, true)
		if err != nil {
			t.Fatalf("recovery %d: %v", i, err)
		}
		if rec.file != name || rec.resume.Name != name || rec.resume.Pos != uint32(len(want)) || rec.scan.end != int64(len(want)) {
			t.Fatalf("recovery %d resumes in %q at %v (end %d), want %s:%d", i, rec.file, rec.resume, rec.scan.end, name, len(want))
		}
		if rec.gtid.String() != set {
			t.Fatalf("recovery %d: GTID set %q, want %q", i, rec.gtid, set)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("recovery %d: %s holds %d bytes (%v), want the %d bytes before the damage", i, name, len(got), err, len(want))
		}
		for _, g := range gone {
			if _, err := os.Stat(filepath.Join(dir, g)); !os.IsNotExist(err) {
				t.Fatalf("recovery %d: %s, after the incomplete file, is still there (%v)", i, g, err)
			}
		}
		m, ok, err := readMeta(dir)
		if err != nil || !ok || m != (Meta{BinlogName: name, BinlogPos: uint32(len(want)), BinlogGTID: set}) {
			t.Fatalf("recovery %d: meta %+v (%v, %v), want %s:%d %q", i, m, ok, err, name, len(want), set)
		}
	}
}

// lastBoundary is the last group boundary of b at or before off, and the
// GTID set there.
func lastBoundary(b *relayFileBuilder, off int) (int, string) {
	end, set := 0, ""
	for i, x := range b.boundaries {
		if x <= off {
			end, set = x, b.sets[i]
		}
	}
	return end, set
}

// TestRecoverTornFileBeforeLast: after a power loss, the file before the
// last (which the meta names, inside it) lost a page in its middle and its
// tail. Recovery cuts it to its last whole group before the damage, removes
// the last file and resumes there, with the set of that group.
func TestRecoverTornFileBeforeLast(t *testing.T) {
	f1 := chainFile(10, 5, true, "mariadb-bin.000002")
	f2 := chainFile(15, 20, true, "mariadb-bin.000003")
	f3 := chainFile(35, 5, true, "")
	torn := bytes.Clone(f2.buf[:len(f2.buf)-100])
	const page = 4 << 10
	clear(torn[4*page : 5*page])
	metaPos, metaSet := f2.boundaries[2], f2.sets[2]
	root := writeChain(t, [][2]string{
		{"mariadb-bin.000001", string(f1.buf)}, {"mariadb-bin.000002", string(torn)}, {"mariadb-bin.000003", string(f3.buf)},
	}, Meta{BinlogName: "mariadb-bin.000002", BinlogPos: uint32(metaPos), BinlogGTID: metaSet})

	end, set := lastBoundary(f2, 4*page)
	if end <= metaPos {
		t.Fatalf("test file: the damage at %d is not after the meta's position %d", 4*page, metaPos)
	}
	checkRecovered(t, root, "mariadb-bin.000002", f2.buf[:end], set, "mariadb-bin.000003")
	got, err := os.ReadFile(filepath.Join(root, chainSub, "mariadb-bin.000001"))
	if err != nil || !bytes.Equal(got, f1.buf) {
		t.Fatalf("the file before the meta's was changed (%v)", err)
	}
}

// TestRecoverWholeFilesAfterMeta: the meta lags two files behind; the files
// before the last are whole and kept, the last one's torn tail is cut, and
// the GTID set adds up the groups the meta does not cover, also when no
// file names the set it starts with.
func TestRecoverWholeFilesAfterMeta(t *testing.T) {
	for _, list := range []bool{true, false} {
		t.Run(fmt.Sprintf("gtid_list=%v", list), func(t *testing.T) {
			f1 := chainFile(10, 5, list, "mariadb-bin.000002")
			f2 := chainFile(15, 5, list, "mariadb-bin.000003")
			f3 := chainFile(20, 5, list, "")
			cut := len(f3.buf) - 30
			metaPos, metaSet := f1.boundaries[2], f1.sets[2]
			root := writeChain(t, [][2]string{
				{"mariadb-bin.000001", string(f1.buf)}, {"mariadb-bin.000002", string(f2.buf)}, {"mariadb-bin.000003", string(f3.buf[:cut])},
			}, Meta{BinlogName: "mariadb-bin.000001", BinlogPos: uint32(metaPos), BinlogGTID: metaSet})
			end, set := lastBoundary(f3, cut)
			checkRecovered(t, root, "mariadb-bin.000003", f3.buf[:end], set)
			for name, want := range map[string][]byte{"mariadb-bin.000001": f1.buf, "mariadb-bin.000002": f2.buf} {
				if got, err := os.ReadFile(filepath.Join(root, chainSub, name)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("whole file %s was changed (%v)", name, err)
				}
			}
		})
	}
}

// TestRecoverFileWithoutRotate: a file before the last that parses to its
// end but lacks the rotate event (its last page was never written) is not
// whole: it becomes the last file, as is, and the files after it go.
func TestRecoverFileWithoutRotate(t *testing.T) {
	f1 := chainFile(10, 5, true, "mariadb-bin.000002")
	f2 := chainFile(15, 5, true, "")
	root := writeChain(t, [][2]string{
		{"mariadb-bin.000001", string(f1.buf[:f1.boundaries[len(f1.boundaries)-2]])}, {"mariadb-bin.000002", string(f2.buf)},
	}, Meta{BinlogName: "mariadb-bin.000001", BinlogPos: uint32(f1.boundaries[1]), BinlogGTID: f1.sets[1]})
	end := f1.boundaries[len(f1.boundaries)-2]
	checkRecovered(t, root, "mariadb-bin.000001", f1.buf[:end], f1.sets[len(f1.sets)-2], "mariadb-bin.000002")
}

// TestRecoverMetaFilePurged: the purger removed the meta's file after it
// was rotated out; the files after it are checked all the same.
func TestRecoverMetaFilePurged(t *testing.T) {
	f1 := chainFile(10, 5, true, "mariadb-bin.000002")
	f2 := chainFile(15, 5, true, "mariadb-bin.000003")
	f3 := chainFile(20, 5, true, "")
	torn := f2.buf[:f2.boundaries[3]+10]
	root := writeChain(t, [][2]string{{"mariadb-bin.000002", string(torn)}, {"mariadb-bin.000003", string(f3.buf)}},
		Meta{BinlogName: "mariadb-bin.000001", BinlogPos: uint32(f1.boundaries[2]), BinlogGTID: f1.sets[2]})
	checkRecovered(t, root, "mariadb-bin.000002", f2.buf[:f2.boundaries[3]], f2.sets[3], "mariadb-bin.000003")
}
