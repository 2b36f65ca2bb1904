#!/usr/bin/env bash
# Installs what `make test` needs and is missing: the MariaDB server and client programs and
# nats-server (Debian packages, never started as a service by us and never used by the tests,
# which start their own servers), percona-toolkit (Debian's package: pt-online-schema-change,
# which the online-DDL tests run against their own source) and failpoint-ctl (go install). With --bench also sysbench and
# mydumper (Debian's package, which provides mydumper and myloader).
# Idempotent: installs only what is missing and says what it did. Runs as root, or uses sudo.
set -euo pipefail

FAILPOINT_MODULE=github.com/pingcap/failpoint/failpoint-ctl
FAILPOINT_VERSION=v0.0.0-20240528011301-b51a646c7c86 # the failpoint version in go.mod
MARIADB_PROGRAMS=(mariadbd mariadb-install-db mariadb mariadb-admin mariadb-binlog)

say() { echo "install-deps: $*"; }
die() {
	echo "install-deps: ERROR: $*" >&2
	exit 1
}
usage() { echo "usage: $0 [--bench]   (--bench also installs sysbench and mydumper/myloader)"; }

bench=0
for arg in "$@"; do
	case "$arg" in
	--bench) bench=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		die "unknown argument: $arg"
		;;
	esac
done

# have PROGRAM: on $PATH, or in /usr/sbin or /usr/bin (absent from a normal user's $PATH).
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root to run '$*': run this script as root or install sudo"
	fi
}

# apt_install PACKAGE...: installs Debian packages without starting their services.
apt_updated=0
apt_install() {
	command -v apt-get >/dev/null 2>&1 ||
		die "apt-get not found: install $* with your system's package manager (MariaDB 10.6 or newer)"
	# policy-rc.d exit 101 forbids package scripts to start services (a mariadb-server postinst
	# would start a system server on 3306; the tests never use it, but it need not run at all).
	local policy=/usr/sbin/policy-rc.d added_policy=0
	if [ ! -e "$policy" ]; then
		as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
		added_policy=1
	fi
	local rc=0
	if [ "$apt_updated" -eq 0 ]; then
		say "apt-get update"
		as_root apt-get update -q || rc=$?
		apt_updated=1
	fi
	if [ "$rc" -eq 0 ]; then
		say "apt-get install $*"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" || rc=$?
	fi
	if [ "$added_policy" -eq 1 ]; then
		as_root rm -f "$policy"
	fi
	[ "$rc" -eq 0 ] || die "installing $* failed (exit $rc)"
}

did=()

# MariaDB server and client programs.
missing=()
for p in "${MARIADB_PROGRAMS[@]}"; do
	have "$p" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	say "missing MariaDB programs: ${missing[*]}"
	apt_install mariadb-server mariadb-client
	for p in "${MARIADB_PROGRAMS[@]}"; do
		have "$p" || die "$p is still missing after installing mariadb-server and mariadb-client"
	done
	did+=("installed mariadb-server mariadb-client")
fi
mariadbd_bin=$(command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd)
say "MariaDB: $("$mariadbd_bin" --no-defaults --version)"

# nats-server, which the stream tests start as `nats-server -js` (tests/natstest).
if have nats-server; then
	say "nats-server: already installed"
else
	apt_install nats-server
	have nats-server || die "nats-server is still missing after installing it"
	did+=("installed nats-server")
fi
nats_bin=$(command -v nats-server 2>/dev/null || echo /usr/sbin/nats-server)
say "$("$nats_bin" --version)"

# pt-online-schema-change (Debian's percona-toolkit), which the online schema change tests run
# against a test source (issue 26).
if have pt-online-schema-change; then
	say "pt-online-schema-change: already installed"
else
	apt_install percona-toolkit
	have pt-online-schema-change || die "pt-online-schema-change is still missing after installing percona-toolkit"
	did+=("installed percona-toolkit")
fi
ptosc_bin=$(command -v pt-online-schema-change 2>/dev/null || echo /usr/bin/pt-online-schema-change)
say "$("$ptosc_bin" --version)"

# sysbench, for `make bench` comparisons.
if [ "$bench" -eq 1 ]; then
	if have sysbench; then
		say "sysbench: already installed"
	else
		apt_install sysbench
		have sysbench || die "sysbench is still missing after installing it"
		did+=("installed sysbench")
	fi
	# mydumper and myloader, the reference of the full-data benchmark (tests/bench/dumpload_test.go).
	if have mydumper && have myloader; then
		say "mydumper: already installed"
	else
		apt_install mydumper
		have mydumper || die "mydumper is still missing after installing it"
		have myloader || die "myloader is still missing after installing mydumper"
		did+=("installed mydumper")
	fi
fi

# failpoint-ctl, into the Go bin directory (the Makefile looks for it there).
command -v go >/dev/null 2>&1 || die "go not found on PATH: install Go 1.26 (https://go.dev/dl/)"
say "Go: $(go version)"
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if [ -x "$gobin/failpoint-ctl" ]; then
	say "failpoint-ctl: already installed in $gobin"
else
	say "go install $FAILPOINT_MODULE@$FAILPOINT_VERSION"
	(cd / && GOFLAGS= go install "$FAILPOINT_MODULE@$FAILPOINT_VERSION") ||
		die "go install $FAILPOINT_MODULE@$FAILPOINT_VERSION failed"
	[ -x "$gobin/failpoint-ctl" ] || die "failpoint-ctl is not in $gobin after go install"
	did+=("installed failpoint-ctl into $gobin")
fi

if [ "${#did[@]}" -eq 0 ]; then
	say "nothing to do: every dependency is installed"
else
	for d in "${did[@]}"; do say "done: $d"; done
fi
