# dm-worker build and test entry points. `make test` is what CI runs (through .ci/run).
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
# Stamped into pkg/version by `make build` (dm-worker --version, dmctl --version).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
GIT_HASH ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/dmworker/dm-worker/pkg/version.Version=$(VERSION) -X github.com/dmworker/dm-worker/pkg/version.GitHash=$(GIT_HASH)
GOBIN_DIR := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)
FAILPOINT_CTL ?= $(GOBIN_DIR)/failpoint-ctl

# Directories whose failpoints (failpoint.Inject markers) are rewritten into live code while the
# failpoint tests run, e.g. `FAILPOINT_PKGS := ./unit/syncer ./relay`. Empty: no failpoint tests yet.
FAILPOINT_PKGS ?= ./unit/syncer
# Test files that need live failpoints carry `//go:build failpoint`; the packages holding such
# files are run once more, with -tags failpoint, while FAILPOINT_PKGS are enabled.
# Only the tests written for live failpoints run in that pass; the packages' other tests already ran.
FAILPOINT_TEST_RUN ?= FaultPoint|Failpoint
FAILPOINT_TEST_PKGS = $(shell grep -rlE --include='*_test.go' '^//go:build .*\bfailpoint\b' . 2>/dev/null | xargs -r -n1 dirname | sort -u)

# -race on the integration tests too: they are the ones that drive the worker's goroutines
# against real servers, and the harness's own tests take ~10 s with it on two cores.
INTEGRATION_FLAGS ?= -race
INTEGRATION_TIMEOUT ?= 20m
UNIT_TIMEOUT ?= 10m

.PHONY: build run test test-unit test-integration test-failpoint test-streams-full test-fulldata-full test-large vet deps bench fuzz failpoint-enable failpoint-disable clean

## demo: throwaway MariaDB source + target, a worker with embedded etcd, 200k rows on the source,
## a source and a task in mode all created with dmctl (dump, load and sync progress shown), a
## workload, status, a check that the target equals the source, the validator's verdict (mode full), and a file-sink stream; everything is stopped at the end (KEEP=1 leaves it running; DEMO_RELAY=true
## replicates through the relay)
demo: deps build
	bash scripts/demo.sh

## build: every main package under cmd/ into bin/
build:
	@mkdir -p bin
	@mains=$$($(GO) list -e -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./cmd/...); \
	if [ -z "$$mains" ]; then echo "build: no main packages under cmd/ yet"; exit 0; fi; \
	echo "go build -ldflags '$(LDFLAGS)' -o bin/ $$mains"; \
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ $$mains

## run: build, then run one worker with embedded etcd in the foreground (Ctrl-C stops it).
## RUN_NAME, RUN_ETCD (client URL), RUN_STATUS_ADDR and RUN_DATA_DIR override the defaults.
RUN_NAME ?= w1
RUN_ETCD ?= http://127.0.0.1:2379
RUN_STATUS_ADDR ?= 127.0.0.1:8262
RUN_DATA_DIR ?= ./data
run: build
	@echo "Starting dm-worker $(RUN_NAME) with embedded etcd (data in $(RUN_DATA_DIR); Ctrl-C stops it)."
	@echo "  etcd endpoint: $(RUN_ETCD)"
	@echo "  status API:    http://$(RUN_STATUS_ADDR)/api/v1/status   (also /healthz, /metrics)"
	@echo "  try, in another shell (source.yaml and task.yaml: see the Quickstart in README.md):"
	@echo "    bin/dmctl --etcd-endpoints $(RUN_ETCD) worker list"
	@echo "    bin/dmctl --etcd-endpoints $(RUN_ETCD) source create source.yaml --worker $(RUN_NAME)"
	@echo "    bin/dmctl --etcd-endpoints $(RUN_ETCD) task start task.yaml"
	@echo "    bin/dmctl --etcd-endpoints $(RUN_ETCD) task status TASK"
	@echo "    curl http://$(RUN_STATUS_ADDR)/api/v1/status"
	@exec bin/dm-worker --name $(RUN_NAME) --embed-etcd --etcd-endpoints $(RUN_ETCD) \
		--status-addr $(RUN_STATUS_ADDR) --data-dir $(RUN_DATA_DIR)

## test: install dependencies, vet, then unit, failpoint and integration tests. All three run
## even when one fails; any failure fails. Integration runs last so that on success the output
## ends with go test's own `ok` lines, which CI reads.
test: deps
	@$(MAKE) --no-print-directory vet
	@rc=0; \
	$(MAKE) --no-print-directory test-unit || rc=1; \
	$(MAKE) --no-print-directory test-failpoint || rc=1; \
	$(MAKE) --no-print-directory test-integration || rc=1; \
	if [ $$rc -ne 0 ]; then echo "make test: FAILED (see the FAIL lines above)"; fi; \
	exit $$rc

## test-unit: every package outside tests/, with the race detector
test-unit:
	@pkgs=$$($(GO) list -e ./... | grep -v '/tests/' || true); \
	if [ -z "$$pkgs" ]; then echo "test-unit: no packages"; exit 0; fi; \
	echo "go test -race -count=1 -timeout $(UNIT_TIMEOUT) <packages outside tests/>"; \
	$(GO) test -race -count=1 -timeout $(UNIT_TIMEOUT) $$pkgs
	@echo "go test -count=1 -run Scale ./worker   (timing-bound scale tests, without the race detector)"
	@$(GO) test -count=1 -run Scale ./worker

## test-integration: tests/... (real MariaDB instances and embedded etcd)
test-integration:
	$(GO) test $(INTEGRATION_FLAGS) -count=1 -timeout $(INTEGRATION_TIMEOUT) ./tests/...

## test-failpoint: enable FAILPOINT_PKGS, run the failpoint-tagged packages, disable again even on failure
test-failpoint:
	@pkgs="$(strip $(FAILPOINT_TEST_PKGS))"; \
	if [ -z "$(strip $(FAILPOINT_PKGS))" ] || [ -z "$$pkgs" ]; then \
		echo "test-failpoint: nothing to run (FAILPOINT_PKGS='$(strip $(FAILPOINT_PKGS))', tagged packages='$$pkgs')"; exit 0; fi; \
	trap 'echo "failpoint-ctl disable $(FAILPOINT_PKGS)"; $(FAILPOINT_CTL) disable $(FAILPOINT_PKGS)' EXIT; \
	trap 'exit 130' INT TERM; \
	echo "failpoint-ctl enable $(FAILPOINT_PKGS)"; \
	$(FAILPOINT_CTL) enable $(FAILPOINT_PKGS); \
	echo "go test -tags failpoint -race -count=1 -timeout $(INTEGRATION_TIMEOUT) -run '$(FAILPOINT_TEST_RUN)'" $$pkgs; \
	$(GO) test -tags failpoint -race -count=1 -timeout $(INTEGRATION_TIMEOUT) -run '$(FAILPOINT_TEST_RUN)' $$pkgs

## fuzz: every fuzz target of the tree (each `func FuzzXxx(f *testing.F)` in a *_test.go file, found
## anew on every run), one after the other, FUZZTIME each (default 60s; FUZZ_FLAGS adds go test
## flags such as -parallel=1). A failing input is saved under the package's testdata/fuzz/FuzzXxx/
## (commit it: it then runs in every `go test` as a regression seed); the run goes on with the next
## target and fails at the end, naming every target that found something. Seed corpora (f.Add and
## testdata/fuzz) already run in `make test`, as part of go test. Then the expression-filter
## differential test against MariaDB (pkg/exprfilter) with EXPR_DIFF_N expressions for each seed
## of EXPR_DIFF_SEEDS (`make test` runs 400 of seed 1).
FUZZTIME ?= 60s
FUZZ_FLAGS ?=
EXPR_DIFF_N ?= 5000
EXPR_DIFF_SEEDS ?= 1 2 3 4
fuzz:
	@targets=$$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | \
		sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*|\1 \2|' | sort -u); \
	if [ -z "$$targets" ]; then echo "fuzz: no fuzz targets"; exit 0; fi; \
	echo "fuzz: $$(echo "$$targets" | wc -l) targets, $(FUZZTIME) each"; \
	log=$$(mktemp); trap 'rm -f "$$log"' EXIT; failed=""; summary=""; \
	while read -r dir name; do \
		echo "== $$name ($$dir)"; \
		run() { $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZ_FLAGS) "$$dir" >"$$log" 2>&1; }; \
		ok=0; run && ok=1; \
		if [ $$ok = 0 ] && grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
			echo "   the fuzzer ended on its own deadline with no failing input (a Go fuzzing engine quirk, not a finding): once more"; \
			run && ok=1; \
		fi; \
		if [ $$ok = 1 ]; then \
			result=ok; { grep -E '^fuzz: elapsed' "$$log" || true; } | tail -n 1; \
		else \
			result=FAILED; failed="$$failed $$name($$dir)"; cat "$$log"; \
		fi; \
		execs=$$({ grep -oE 'execs: [0-9]+' "$$log" || true; } | tail -n 1 | cut -d' ' -f2); \
		summary="$$summary$$(printf '%-28s %-12s %-7s %s execs' "$$name" "$$dir" "$$result" "$${execs:-?}")\n"; \
	done <<<"$$targets"; \
	for seed in $(EXPR_DIFF_SEEDS); do \
		echo "== TestDifferentialMariaDB (./pkg/exprfilter), EXPR_DIFF_N=$(EXPR_DIFF_N) EXPR_DIFF_SEED=$$seed"; \
		if EXPR_DIFF_N=$(EXPR_DIFF_N) EXPR_DIFF_SEED=$$seed $(GO) test -count=1 -timeout 30m -run '^TestDifferentialMariaDB$$' -v ./pkg/exprfilter >"$$log" 2>&1; then \
			result=ok; { grep -oE 'differential test .*' "$$log" || true; }; \
		else \
			result=FAILED; failed="$$failed TestDifferentialMariaDB(seed $$seed)"; grep -vE '^\s+20[0-9]{2}-' "$$log" | tail -n 80; \
		fi; \
		summary="$$summary$$(printf '%-28s %-12s %-7s seed %s' TestDifferentialMariaDB ./pkg/exprfilter "$$result" "$$seed")\n"; \
	done; \
	echo "fuzz summary ($(FUZZTIME) per target):"; printf "$$summary"; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed (failing inputs are under each package's testdata/fuzz/)"; exit 1; fi; \
	echo "fuzz: no findings"

## vet: go vet ./...
vet:
	$(GO) vet ./...

## deps: install MariaDB, percona-toolkit, nats-server and failpoint-ctl when missing (scripts/install-deps.sh)
deps:
	bash scripts/install-deps.sh

## bench: relay vs mariadb-binlog --raw, sync vs native replication (1 and 4 threads), stream,
## full-data dump + load (task-mode full vs mariadb-dump | mariadb and mydumper + myloader, 1M
## sysbench rows), shard merge (8 shards caught up into one table with shard-mode pessimistic vs
## into 8 tables; shard DDL lock latency over 20 locks), stage-to-action latency; results in
## tests/bench/results.tsv and docs/benchmarks.md (BENCH_RELAY_MB, BENCH_SYNC_ROWS, BENCH_FULL_ROWS,
## BENCH_SHARD_ROWS); first the expression-filter evaluation (BenchmarkEval in pkg/exprfilter: ns and
## allocations per row)
bench:
	bash scripts/install-deps.sh --bench
	$(GO) test -run '^$$' -bench BenchmarkEval -benchmem -count=1 ./pkg/exprfilter
	$(GO) test -tags bench -count=1 -timeout 60m -run . -v ./tests/bench

## test-streams-full: the stream end-to-end tests at the issue's counts (100k changes, 200k rows, 10 kills)
test-streams-full: deps
	DM_STREAM_E2E_FULL=1 $(GO) test -count=1 -timeout 40m -run 'Stream' -v ./tests/e2e

## test-fulldata-full: the dump/load kill test at the issue's size (1M rows in 8 tables, 3 kills
## during the dump and 5 during the load)
test-fulldata-full: deps
	DM_FULLDATA_E2E_FULL=1 $(GO) test -count=1 -timeout 40m -run 'TestFullDataSurvivesKill9' -v ./tests/e2e

## test-large: the large-transaction tests at the issue's sizes, sync and streams: one INSERT ... SELECT
## of N rows into a keyed and a key-less table and one UPDATE of N rows (TestSyncLargeTransaction*), and
## one UPDATE of N rows streamed to a file sink (TestStreamBigTxn*), relay off and on, kill -9 in the
## middle of each, worker peak RSS <= 256 MiB; N = 2M, then 10M (LARGE_ROWS overrides the list, comma-separated)
LARGE_ROWS ?= 2000000,10000000
test-large: deps
	DM_BIGTXN_ROWS=$(LARGE_ROWS) $(GO) test -count=1 -timeout 360m -run 'TestSyncLargeTransaction|TestStreamBigTxn' -v ./tests/e2e

## failpoint-enable: rewrite failpoint markers into live code in FAILPOINT_PKGS (the whole tree when empty)
failpoint-enable:
	$(FAILPOINT_CTL) enable $(or $(strip $(FAILPOINT_PKGS)),.)

## failpoint-disable: restore the files failpoint-enable rewrote
failpoint-disable:
	$(FAILPOINT_CTL) disable $(or $(strip $(FAILPOINT_PKGS)),.)

clean:
	rm -rf bin
