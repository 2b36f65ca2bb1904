#!/usr/bin/env bash
# make demo: throwaway MariaDB source and target, one dm-worker with embedded etcd, rows on the source,
# a source and a task in mode `all` created with dmctl (dump → load → sync, with progress shown), a
# workload while it syncs, the task's status, a check that the target equals the source, and a
# change-data-capture stream to files. Everything it starts is stopped at the end; KEEP=1 leaves it running
# and prints how to stop it. All traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

work=${DEMO_DIR:-$(mktemp -d /tmp/dm-demo.XXXXXX)}
mkdir -p "$work"
echo "demo: working in $work"

free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "demo: no free port found" >&2
	return 1
}

etcd_port=$(free_port)
http_port=$(free_port)
mysql() { local port=$1; shift; mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uroot "$@"; }
dmctl() { "$root/bin/dmctl" --etcd-endpoints "http://127.0.0.1:$etcd_port" "$@"; }

worker_pid=""
cleanup() {
	if [ "${KEEP:-0}" = 1 ]; then
		cat <<EOF

demo: left running (KEEP=1). To stop:
  kill $worker_pid
  scripts/mariadb-instance.sh stop $work/source
  scripts/mariadb-instance.sh stop $work/target
EOF
		return
	fi
	echo "demo: stopping everything"
	if [ -n "$worker_pid" ]; then
		kill "$worker_pid" 2>/dev/null || true
		wait "$worker_pid" 2>/dev/null || true
	fi
	scripts/mariadb-instance.sh stop "$work/source" || true
	scripts/mariadb-instance.sh stop "$work/target" || true
}
trap cleanup EXIT

# start_instance ROLE SERVER_ID: starts the instance on a free port and prints the port; a port
# another process took between the pick and the bind is replaced by another one.
start_instance() {
	local role=$1 sid=$2 port
	for _ in 1 2 3 4 5; do
		port=$(free_port)
		if scripts/mariadb-instance.sh start "$work/$role" "$port" "$role" "$sid" >&2; then
			echo "$port"
			return 0
		fi
		echo "demo: $role could not start on port $port; trying another port" >&2
	done
	return 1
}
src_port=$(start_instance source 101)
tgt_port=$(start_instance target 102)

# The stream starts from the source's position before any row exists, so it carries every change.
read -r binlog_name binlog_pos < <(mysql "$src_port" -N -e 'SHOW MASTER STATUS' | awk '{print $1, $2}')
echo "demo: source binlog at $binlog_name:$binlog_pos"

rows=${DEMO_ROWS:-200000}
echo "demo: $rows rows on the source before the task starts"
mysql "$src_port" -e "
CREATE DATABASE shop;
CREATE TABLE shop.orders (id BIGINT PRIMARY KEY AUTO_INCREMENT, customer VARCHAR(64) NOT NULL,
  amount DECIMAL(12,2) NOT NULL, note TEXT, created DATETIME(3) NOT NULL, KEY (customer));
INSERT INTO shop.orders (customer, amount, note, created)
  SELECT CONCAT('customer-', seq % 5000), seq * 1.25, IF(seq % 7 = 0, NULL, CONCAT('note ', seq, ' ✓')), NOW(3)
  FROM shop.seq_1_to_$rows;
CREATE TABLE shop.customers (name VARCHAR(64) PRIMARY KEY, since DATE, vip BIT(1));
INSERT INTO shop.customers SELECT CONCAT('customer-', seq), '2020-01-01' + INTERVAL seq DAY, seq % 10 = 0
  FROM shop.seq_0_to_4999;"

"$root/bin/dm-worker" --name demo-worker --embed-etcd \
	--etcd-endpoints "http://127.0.0.1:$etcd_port" --status-addr "127.0.0.1:$http_port" \
	--data-dir "$work/worker" --log-file "$work/worker.log" &
worker_pid=$!
for _ in $(seq 1 300); do
	(exec 3<>"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null && break
	kill -0 "$worker_pid" 2>/dev/null || { echo "demo: dm-worker exited; see $work/worker.log" >&2; tail -n 30 "$work/worker.log" >&2; exit 1; }
	sleep 0.1
done
for _ in $(seq 1 300); do
	dmctl --output json worker list 2>/dev/null | grep -q '"alive": *true' && break
	sleep 0.1
done
echo "demo: dm-worker up (status http://127.0.0.1:$http_port/api/v1/status, etcd http://127.0.0.1:$etcd_port)"

cat >"$work/source.yaml" <<EOF
source-id: demo-source
flavor: mariadb
enable-relay: ${DEMO_RELAY:-false}
from: {host: 127.0.0.1, port: $src_port, user: root, password: ""}
EOF
cat >"$work/task.yaml" <<EOF
name: demo
task-mode: all
target-database: {host: 127.0.0.1, port: $tgt_port, user: root, password: ""}
mysql-instances:
  - source-id: demo-source
    block-allow-list: demo-only
    mydumper-config-name: demo
    validator-config-name: demo
block-allow-list:
  demo-only: {do-dbs: ["shop"]}
mydumpers:
  demo: {threads: 4, rows: 10000}
validators:
  demo: {mode: full, worker-count: 4, row-error-delay: 30s}
EOF
cat >"$work/stream.yaml" <<EOF
name: demo-cdc
source-id: demo-source
block-allow-list: {do-dbs: ["shop"]}
start: {binlog-name: $binlog_name, binlog-pos: $binlog_pos}
format: debezium
sink:
  type: file
  file: {dir: $work/cdc, rotate-size: 64MiB}
EOF
dmctl source create "$work/source.yaml" --worker demo-worker
dmctl task check "$work/task.yaml"
dmctl task start "$work/task.yaml"
dmctl stream create "$work/stream.yaml"

# The subtask goes Dump → Load → Sync; print its unit and progress whenever they change.
echo "demo: task demo (mode all) copies the existing rows, then replicates"
last=""
for _ in $(seq 1 1200); do
	st=$(dmctl task status demo 2>/dev/null | grep -E '^source |^  chunks |^  progress:' || true)
	if [ "$st" != "$last" ]; then
		echo "$st" | cut -c1-300
		last=$st
	fi
	echo "$st" | grep -q 'unit Sync' && break
	if echo "$st" | grep -qE 'stage (Paused|Stopped)'; then
		dmctl task status demo >&2 || true
		echo "demo: the task stopped; see $work/worker.log" >&2
		exit 1
	fi
	sleep 0.5
done

echo "demo: workload on the source while the task syncs"
mysql "$src_port" -e "
UPDATE shop.orders SET amount = amount + 10 WHERE id % 5 = 0;
DELETE FROM shop.orders WHERE id % 11 = 0;
INSERT INTO shop.orders (customer, amount, note, created)
  SELECT CONCAT('customer-', seq), seq * 0.5, 'new ✓', NOW(3) FROM shop.seq_1_to_5000;
ALTER TABLE shop.orders ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'new';
UPDATE shop.orders SET status = 'paid' WHERE id % 3 = 0;
UPDATE shop.customers SET vip = 1 WHERE name LIKE 'customer-1%';"

want=$(mysql "$src_port" -N -e 'CHECKSUM TABLE shop.orders, shop.customers' | awk '{print $2}' | paste -sd,)
echo "demo: waiting for the target to catch up"
got=""
for _ in $(seq 1 600); do
	got=$(mysql "$tgt_port" -N -e 'CHECKSUM TABLE shop.orders, shop.customers' 2>/dev/null | awk '{print $2}' | paste -sd, || true)
	[ "$got" = "$want" ] && break
	sleep 0.1
done
echo
dmctl task status demo
echo
count=$(mysql "$tgt_port" -N -e 'SELECT COUNT(*) FROM shop.orders')
if [ "$got" = "$want" ]; then
	echo "demo: OK — target equals source (CHECKSUM $want; $count rows in shop.orders)"
else
	echo "demo: target does not equal source (source CHECKSUM $want, target ${got:-none}); see $work/worker.log" >&2
	exit 1
fi

# The validator (mode full) compared every row the sync unit changed with the source's row image.
echo "demo: waiting for the validator to judge every change"
for _ in $(seq 1 600); do
	vst=$(dmctl --output json validation status demo 2>/dev/null | tr -d ' \n' || true)
	echo "$vst" | grep -q '"pending":0,' && echo "$vst" | grep -q '"state":"validating"' &&
		echo "$vst" | grep -q "\"binlog\":\"$(mysql "$src_port" -N -e 'SHOW MASTER STATUS' | awk '{print $1":"$2}')\"" && break
	sleep 0.2
done
dmctl validation status demo
if echo "$vst" | grep -q '"new":0,'; then
	echo "demo: OK — the validator found no difference"
else
	dmctl validation errors demo >&2 || true
	echo "demo: the validator reports differences; see $work/worker.log" >&2
	exit 1
fi
echo

# Every row change above is also a change event of the demo-cdc stream: the inserts before the task,
# the workload's updates, deletes and inserts, and the DDL statements as DDL events.
read -r end_name end_pos < <(mysql "$src_port" -N -e 'SHOW MASTER STATUS' | awk '{print $1, $2}')
echo
echo "demo: waiting for stream demo-cdc to reach $end_name:$end_pos"
for _ in $(seq 1 600); do
	dmctl --output json stream status demo-cdc 2>/dev/null | grep -q "\"checkpoint\": *\"$end_name:$end_pos\"" && break
	sleep 0.1
done
dmctl stream status demo-cdc
events=$(cat "$work"/cdc/*.jsonl 2>/dev/null | wc -l)
echo
echo "demo: first change events in $work/cdc:"
head -q -n 3 "$work"/cdc/demo-cdc.*.jsonl 2>/dev/null | cut -c1-400
if [ "$events" -gt "$rows" ]; then
	echo "demo: OK — stream demo-cdc delivered $events change events"
else
	echo "demo: stream demo-cdc delivered $events change events, expected more than $rows; see $work/worker.log" >&2
	exit 1
fi
