package mariadbtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// templateFormat changes whenever the way the template is built changes, so that caches built
// by an older harness are not reused.
const templateFormat = "mariadbtest-template-v2"

// installTimeout bounds mariadb-install-db plus the user setup on the template.
const installTimeout = 3 * time.Minute

// setupStatements run once, as root over the socket, on the freshly installed template.
// mariadb-install-db also creates root@<hostname>, which skip-name-resolve ignores with a
// warning in every start-up log; it and any anonymous user are dropped separately.
var setupStatements = []string{
	"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'",
	"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
	fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", SourceUser, SourcePassword),
	fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.* TO '%s'@'%%'", SourceUser),
}

// templateCache hands out the initialised data directory that instances copy, building it at
// most once per mariadbd binary in this process and at most once per key across processes.
type templateCache struct {
	mu   sync.Mutex
	dirs map[string]string // mariadbd path → template data directory
}

// templates is the process-wide cache: the template is a property of the installed MariaDB,
// not of any one test.
var templates = &templateCache{dirs: make(map[string]string)}

// dataDir returns the template data directory for bins, building it when needed.
func (c *templateCache) dataDir(tb testing.TB, bins binaries) string {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if dir, ok := c.dirs[bins.mariadbd]; ok {
		return dir
	}
	start := time.Now()
	dir, built, err := obtainTemplate(tb.Context(), bins)
	if err != nil {
		tb.Fatalf("mariadbtest: prepare the template data directory: %v", err)
	}
	if built {
		tb.Logf("mariadbtest: built template data directory %s in %v", dir, time.Since(start).Round(time.Millisecond))
	}
	c.dirs[bins.mariadbd] = dir
	return dir
}

// obtainTemplate returns the cached template data directory under os.TempDir(), building it
// under an exclusive lock file when no complete one exists. built reports whether it was built now.
func obtainTemplate(ctx context.Context, bins binaries) (dir string, built bool, err error) {
	version, err := exec.CommandContext(ctx, bins.mariadbd, "--no-defaults", "--version").CombinedOutput()
	if err != nil {
		return "", false, fmt.Errorf("run %s --version: %w: %s", bins.mariadbd, err, version)
	}
	root, err := cacheRoot()
	if err != nil {
		return "", false, err
	}
	sum := sha256.Sum256([]byte(strings.Join(append([]string{templateFormat, bins.mariadbd, bins.installDB,
		string(version)}, append(innodbSettings, setupStatements...)...), "\n")))
	key := hex.EncodeToString(sum[:8])
	final := filepath.Join(root, "template-"+key)

	lock, err := os.OpenFile(filepath.Join(root, "template-"+key+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("open template lock file: %w", err)
	}
	defer lock.Close() // closing releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", false, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}

	if verifyTemplate(final) == nil {
		return dataDir(final), false, nil
	}
	// Whatever is left here was abandoned by a process that died while building, or lost files
	// to a /tmp cleaner: we hold the lock, so nobody else uses it now.
	if err := os.RemoveAll(final); err != nil {
		return "", false, fmt.Errorf("remove incomplete template %s: %w", final, err)
	}
	stale, err := filepath.Glob(filepath.Join(root, "build-"+key+"-*"))
	if err != nil {
		return "", false, fmt.Errorf("list abandoned template builds: %w", err)
	}
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return "", false, fmt.Errorf("remove abandoned template build %s: %w", s, err)
		}
	}

	build, err := os.MkdirTemp(root, "build-"+key+"-")
	if err != nil {
		return "", false, fmt.Errorf("create template build directory: %w", err)
	}
	if err := buildTemplate(ctx, bins, build); err != nil {
		return "", false, fmt.Errorf("%w (build directory %s kept for inspection)", err, build)
	}
	if err := sparsify(dataDir(build)); err != nil {
		return "", false, fmt.Errorf("make template files sparse: %w", err)
	}
	manifest, err := dirManifest(dataDir(build))
	if err != nil {
		return "", false, fmt.Errorf("list template files: %w", err)
	}
	if err := os.WriteFile(filepath.Join(build, readyFile), []byte(manifest), 0o600); err != nil {
		return "", false, fmt.Errorf("mark template ready: %w", err)
	}
	if err := os.Rename(build, final); err != nil {
		return "", false, fmt.Errorf("publish template: %w", err)
	}
	return dataDir(final), true, nil
}

// sparsify rewrites dir with holes in place of its zero blocks, so that copies of it read only
// the few megabytes of real data (the redo log is 48 MiB of mostly zeros).
func sparsify(dir string) error {
	sparse := dir + ".sparse"
	if err := copyDir(dir, sparse); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(sparse, dir)
}

// readyFile, in a template directory, lists every file of the data directory with its size.
// It is written last: a template without it, or whose files differ from it, is rebuilt.
const readyFile = "READY"

// dirManifest lists the regular files under dir as "size relative-path" lines.
func dirManifest(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%d %s\n", info.Size(), rel)
		return nil
	})
	return b.String(), err
}

// verifyTemplate checks that the template in dir is complete and unchanged.
func verifyTemplate(dir string) error {
	want, err := os.ReadFile(filepath.Join(dir, readyFile))
	if err != nil {
		return err
	}
	got, err := dirManifest(dataDir(dir))
	if err != nil {
		return err
	}
	if got != string(want) {
		return fmt.Errorf("template %s differs from its manifest", dir)
	}
	return nil
}

// cacheRoot returns a directory under os.TempDir() private to the current user.
func cacheRoot() (string, error) {
	root := filepath.Join(os.TempDir(), fmt.Sprintf("mariadbtest-cache-%d", os.Geteuid()))
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("create template cache directory: %w", err)
	}
	info, err := os.Lstat(root)
	if err != nil {
		return "", fmt.Errorf("stat template cache directory: %w", err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("template cache %s is not a directory owned by uid %d; remove it", root, os.Geteuid())
	}
	return root, nil
}

// buildTemplate runs mariadb-install-db into dir/data, then starts a server on it without
// networking, creates the users over the socket and shuts it down cleanly.
func buildTemplate(ctx context.Context, bins binaries, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	asRoot := os.Geteuid() == 0

	args := []string{
		"--no-defaults",
		"--datadir=" + dataDir(dir),
		"--auth-root-authentication-method=normal", // root@localhost and root@127.0.0.1 without password
		"--skip-test-db",
		"--skip-name-resolve",
	}
	if asRoot {
		args = append(args, "--user=root")
	}
	for _, s := range innodbSettings { // passed through to the bootstrap mariadbd
		args = append(args, "--"+s)
	}
	cmd := exec.CommandContext(ctx, bins.installDB, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // with its bootstrap mariadbd
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", bins.installDB, err, tailLines(string(out), 30))
	}
	if err := os.MkdirAll(tmpDir(dir), 0o700); err != nil {
		return fmt.Errorf("create template tmpdir: %w", err)
	}

	cfg := serverConfig{opts: Options{Name: "template", FastCommit: true}, serverID: 1, dir: dir, asRoot: asRoot}
	proc, err := launchServer(bins, cfg)
	if err != nil {
		return err
	}
	if err := setupTemplateServer(ctx, proc, dir); err != nil {
		return errors.Join(err, proc.kill())
	}
	return nil
}

// setupTemplateServer waits for the template server, creates the users and shuts it down cleanly.
func setupTemplateServer(ctx context.Context, proc *serverProcess, dir string) error {
	socketDSN := fmt.Sprintf("%s@unix(%s)/", RootUser, socketPath(dir))
	if err := waitReady(ctx, proc, socketDSN); err != nil {
		return fmt.Errorf("template server: %w\n%s", err, readTail(errorLogPath(dir), 30))
	}
	if err := setupUsers(ctx, socketDSN); err != nil {
		return fmt.Errorf("template server: %w\n%s", err, readTail(errorLogPath(dir), 30))
	}
	if err := proc.signal(syscall.SIGTERM); err != nil {
		return err
	}
	exitErr, err := proc.wait(stopTimeout)
	if err != nil {
		return fmt.Errorf("template server shutdown: %w", err)
	}
	if exitErr != nil {
		return fmt.Errorf("template server shutdown: mariadbd exited with %w\n%s", exitErr, readTail(errorLogPath(dir), 30))
	}
	return nil
}

// setupUsers drops the users the tests must not meet and creates the ones they use.
func setupUsers(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", dsn, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT User, Host FROM mysql.user WHERE User = '' OR "+
		"(User = 'root' AND Host NOT IN ('localhost', '127.0.0.1', '::1'))")
	if err != nil {
		return fmt.Errorf("list users: %w", err)
	}
	var drops []string
	for rows.Next() {
		var user, host string
		if err := rows.Scan(&user, &host); err != nil {
			return errors.Join(fmt.Errorf("scan user: %w", err), rows.Close())
		}
		drops = append(drops, fmt.Sprintf("DROP USER '%s'@'%s'", quote(user), quote(host)))
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("list users: %w", err)
	}
	for _, stmt := range append(drops, setupStatements...) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// quote escapes s for use inside a single-quoted SQL string.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s)
}
