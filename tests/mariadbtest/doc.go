// Package mariadbtest starts throwaway MariaDB servers for tests in any package of dm-worker.
//
// Every Instance is a private mariadbd process: its data directory, generated my.cnf, socket,
// pid file, tmpdir, binlogs and error log live in one temporary directory, and it listens on a
// free random port on 127.0.0.1. The package owns only the processes and directories it creates:
// it never reads /etc/mysql/my.cnf or ~/.my.cnf (every server and client gets --no-defaults or a
// generated --defaults-file) and never connects to a server it did not start, such as a system
// MariaDB on port 3306.
//
// Instances start from a copy of a data directory that mariadb-install-db initialised once per
// mariadbd version; the copy is cached under os.TempDir() and shared by test processes through a
// lock file, so starting an instance costs a file copy and the server's own start-up.
//
// Every instance is killed in the test's Cleanup, and its process gets SIGKILL from the kernel
// (Pdeathsig) when the test binary dies, so no server outlives the test that started it.
//
// When mariadbd or mariadb-install-db cannot be found the tests that need them are skipped, or
// fail when the environment variable CI is "true".
package mariadbtest
