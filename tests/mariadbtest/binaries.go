package mariadbtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fallbackDirs are searched after $PATH: non-root users often lack /usr/sbin in $PATH.
var fallbackDirs = []string{"/usr/sbin", "/usr/bin"}

// binaries are the absolute paths of the server programs an instance needs.
type binaries struct {
	mariadbd  string
	installDB string
}

// errBinaryNotFound is wrapped by findBinaries when a program is missing.
var errBinaryNotFound = errors.New("mariadbtest: program not found")

// findProgram looks name up in the directories of pathEnv (a $PATH value), then in extraDirs.
func findProgram(name, pathEnv string, extraDirs []string) (string, error) {
	dirs := append(filepath.SplitList(pathEnv), extraDirs...)
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		info, err := os.Stat(p)
		if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: %s (searched $PATH and %s)", errBinaryNotFound, name, strings.Join(extraDirs, ", "))
}

// findBinaries locates mariadbd and mariadb-install-db.
func findBinaries(pathEnv string, extraDirs []string) (binaries, error) {
	var b binaries
	var errs []error
	var err error
	if b.mariadbd, err = findProgram("mariadbd", pathEnv, extraDirs); err != nil {
		errs = append(errs, err)
	}
	if b.installDB, err = findProgram("mariadb-install-db", pathEnv, extraDirs); err != nil {
		errs = append(errs, err)
	}
	return b, errors.Join(errs...)
}

// requireBinaries returns the server programs, or skips the test (fails it when CI=true)
// when they are not installed.
func requireBinaries(tb testing.TB) binaries {
	tb.Helper()
	b, err := findBinaries(os.Getenv("PATH"), fallbackDirs)
	if err != nil {
		missingBinaries(tb, os.Getenv("CI") == "true", err)
	}
	return b
}

// missingBinaries ends the test because MariaDB is not installed: a skip on a developer's
// machine, a loud failure in CI where a skip would hide that nothing was tested.
func missingBinaries(tb testing.TB, ci bool, err error) {
	tb.Helper()
	if ci {
		tb.Fatalf("mariadbtest: MariaDB is not installed but CI=true, so this test must not be skipped: %v\n"+
			"install it with `make deps` (scripts/install-deps.sh)", err)
		return
	}
	tb.Skipf("mariadbtest: skipping, MariaDB is not installed: %v (run `make deps` to install it)", err)
}

// Program returns the absolute path of a MariaDB client program such as "mariadb" or
// "mariadb-binlog", searching $PATH, /usr/sbin and /usr/bin. When it is missing the test is
// skipped, or fails when CI=true, like the server programs.
func Program(tb testing.TB, name string) string {
	tb.Helper()
	p, err := findProgram(name, os.Getenv("PATH"), fallbackDirs)
	if err != nil {
		missingBinaries(tb, os.Getenv("CI") == "true", err)
	}
	return p
}
