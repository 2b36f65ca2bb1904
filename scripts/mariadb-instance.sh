#!/usr/bin/env bash
# Start or stop a throwaway MariaDB instance in a directory of its own, on a loopback port.
#
#   scripts/mariadb-instance.sh start DIR PORT source|target SERVER_ID
#   scripts/mariadb-instance.sh stop DIR
#
# A source has the binlog on (ROW, FULL row image and metadata); a target has it off. root is
# reachable over TCP from 127.0.0.1 with an empty password. Nothing outside DIR is touched, and
# no system-wide server is used or needed.
set -euo pipefail

find_bin() {
	local name=$1
	command -v "$name" 2>/dev/null && return 0
	for d in /usr/sbin /usr/bin /usr/local/bin /usr/local/mysql/bin; do
		[ -x "$d/$name" ] && { echo "$d/$name"; return 0; }
	done
	echo "mariadb-instance: $name not found; run scripts/install-deps.sh" >&2
	return 1
}

start() {
	local dir=$1 port=$2 role=$3 server_id=$4
	local mariadbd install_db client
	mariadbd=$(find_bin mariadbd)
	install_db=$(find_bin mariadb-install-db)
	client=$(find_bin mariadb)
	dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
	local user_line=""
	[ "$(id -u)" = 0 ] && user_line="user=root"
	local binlog=""
	if [ "$role" = source ]; then
		binlog="log_bin=$dir/mariadb-bin
binlog_format=ROW
binlog_row_image=FULL
binlog_row_metadata=FULL
binlog_checksum=CRC32
log_slave_updates=ON
gtid_domain_id=0"
	fi
	cat >"$dir/my.cnf" <<EOF
[mariadbd]
$user_line
datadir=$dir/data
socket=$dir/mariadbd.sock
pid-file=$dir/mariadbd.pid
log-error=$dir/error.log
tmpdir=$dir/tmp
port=$port
bind-address=127.0.0.1
skip-name-resolve
server_id=$server_id
$binlog
innodb_buffer_pool_size=128M
innodb_flush_log_at_trx_commit=2
sync_binlog=0
performance_schema=OFF
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
max_connections=500
max_allowed_packet=256M
EOF
	mkdir -p "$dir/tmp"
	if [ ! -d "$dir/data/mysql" ]; then
		"$install_db" --defaults-file="$dir/my.cnf" --auth-root-authentication-method=normal \
			--skip-test-db >"$dir/install.log" 2>&1 ||
			{ echo "mariadb-instance: mariadb-install-db failed, see $dir/install.log" >&2; exit 1; }
	fi
	nohup "$mariadbd" --defaults-file="$dir/my.cnf" >"$dir/mariadbd.out" 2>&1 &
	local pid=$!
	for _ in $(seq 1 300); do
		# A server that exited (a port taken meanwhile, a bad setting) fails at once.
		kill -0 "$pid" 2>/dev/null || break
		if "$client" --no-defaults --protocol=SOCKET -S "$dir/mariadbd.sock" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
			"$client" --no-defaults --protocol=SOCKET -S "$dir/mariadbd.sock" -uroot -e \
				"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
			echo "mariadb-instance: $role up on 127.0.0.1:$port (dir $dir)"
			return 0
		fi
		sleep 0.1
	done
	echo "mariadb-instance: $role on port $port did not start; last lines of $dir/error.log:" >&2
	tail -n 20 "$dir/error.log" >&2 || true
	exit 1
}

stop() {
	local dir=$1
	[ -f "$dir/mariadbd.pid" ] || return 0
	local pid
	pid=$(cat "$dir/mariadbd.pid")
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
start) [ $# -eq 5 ] || { echo "usage: $0 start DIR PORT source|target SERVER_ID" >&2; exit 2; }; start "$2" "$3" "$4" "$5" ;;
stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
*) echo "usage: $0 start DIR PORT source|target SERVER_ID | stop DIR" >&2; exit 2 ;;
esac
