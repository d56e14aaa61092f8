# The two commands: `make run` and `make test`. Everything else is what they are made of.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APPS := approvals console config delivery httpapi lib outbox reconciliation incidents
PGHOST ?= /var/run/postgresql
export PGHOST
# Python's bytecode caches, kept under var/ (the tree stays clean) and written even where the environment says
# PYTHONDONTWRITEBYTECODE: without them every process compiles each module it imports from source, and a
# `manage.py dispatch` cost 2.5 s of CPU to start instead of 1.1 s (docs/testing.md). make test starts hundreds.
export PYTHONPYCACHEPREFIX := $(CURDIR)/var/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-suites test-sqlite test-sqlite-rest test-sqlite-web test-sqlite-template test-postgres test-postgres-processes test-postgres-long test-postgres-long-oracle \
	test-postgres-faults test-postgres-browser test-postgres-rest test-postgres-rest-web test-template lint mutation-check postgres chromium pgbouncer faketime nftables soak bench bench-search-10m bench-reconcile-10m bench-console-kept venv clean screenshots \
	lock lock-check promtool monitoring-check oracle

# Installs come from the hashed lock only (runtime, test and build tools: anything unhashed is refused): pip
# installs the locked uv, then uv the rest of the lock (about 10 times faster than pip: a fresh machine's first
# page waits for it), then the project itself without its dependencies. `make lock` refreshes the lock after pyproject.toml
# changes (LOCK_ARGS=--upgrade, or --upgrade-package NAME, moves pins on); `make lock-check` says whether
# the two agree, offline.
LOCK := requirements/lock.txt
LOCK_ARGS ?=

$(STAMP): pyproject.toml $(LOCK)
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing the locked dependencies into $(VENV) (the installer's output is shown only if it fails)"
	@awk '/^uv==/{p=1} p{print} p && !/\\$$/{exit}' $(LOCK) > $(VENV)/uv-lock.txt
	@$(PY) -m pip install --quiet --require-hashes -r $(VENV)/uv-lock.txt > $(VENV)/install.log 2>&1 \
	  || { cat $(VENV)/install.log; exit 1; }
	@$(VENV)/bin/uv pip install --quiet --python $(PY) --require-hashes -r $(LOCK) >> $(VENV)/install.log 2>&1 \
	  || { cat $(VENV)/install.log; exit 1; }
	@$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps --no-build-isolation -e . >> $(VENV)/install.log 2>&1 \
	  || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

venv: $(STAMP)

lock: $(STAMP)
	$(VENV)/bin/uv pip compile pyproject.toml requirements/build.in --extra test --generate-hashes \
		--universal --python-version 3.11 --quiet $(LOCK_ARGS) -o $(LOCK)
	@$(PY) scripts/check_lock.py

lock-check: $(STAMP)
	$(PY) scripts/check_lock.py

run: $(STAMP)
	@bash scripts/run_local.sh

# The migration linter reads the SQL each migration runs on PostgreSQL: lint needs the local server.
lint: $(STAMP) postgres
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/check_structure.py
	@out=$$($(VENV)/bin/radon cc -n C $(APPS)); if [ -n "$$out" ]; then echo "$$out"; echo "radon: rank C or worse"; exit 1; fi
	@for db in "default --include-apps approvals outbox reconciliation incidents" "delivery --include-apps delivery"; do HANDOFF_ALLOW_EPHEMERAL_SECRETS=1 DJANGO_SETTINGS_MODULE=config.settings.migration_lint $(PY) manage.py lintmigrations --quiet ok ignore --database $$db || exit 1; done

postgres:
	@bash scripts/postgres.sh

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The pooler stage (tests/faults/test_pgbouncer*.py) starts a PgBouncer of its own; only the binary is needed.
pgbouncer:
	@test -x /usr/sbin/pgbouncer || command -v pgbouncer >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }

# The skewed-host test (tests/faults/test_skewed_hosts.py) runs dispatchers on wrong clocks with libfaketime.
faketime:
	@ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null; }

# The hosts harness (tests/hosts/) makes faults between network namespaces with nftables (Debian package nftables).
nftables:
	@command -v nft >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; }

# promtool (Debian's prometheus package) checks monitoring/prometheus/alerts.yml and runs its unit tests.
promtool:
	@command -v promtool >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

monitoring-check: promtool
	promtool check rules monitoring/prometheus/alerts.yml
	promtool test rules monitoring/prometheus/alerts_test.yml

# The suite on SQLite (embedded default) in two halves that run side by side, as the PostgreSQL rest: the screens
# and the scenarios (console, security, sign-on, oracle, acceptance) and everything else. As one process it was
# make test's critical path (about 17.7 of 17:52 minutes on 2 idle cores) for 5.4 minutes of CPU: one process
# among the suites' gets its share of the cores, two get twice that. In the one-process run the two halves'
# files used 150 s and 151 s of CPU (docs/testing.md). Each half's in-memory test databases are copies of one
# that the first half to get there migrates and writes to SQLITE_TEMPLATE (tests/sqlite_template.py), which
# `test-sqlite-template` empties before them: one migrate (16 s of CPU) for both. Between them they select
# every test SQLite runs once (tests/scripts/test_make_streams.py).
SQLITE_MARKERS := not postgres and not browser and not demo
SQLITE_WEB := tests/console tests/security tests/sso tests/oracle tests/acceptance
SQLITE_TEMPLATE := var/test-sqlite-template
test-sqlite: test-sqlite-rest test-sqlite-web

test-sqlite-template:
	@rm -rf $(SQLITE_TEMPLATE)

test-sqlite-rest: $(STAMP) test-sqlite-template
	@echo "== test suite on SQLite (embedded default): everything but the screens and the scenarios =="
	env -u DATABASE_URL -u DELIVERY_DATABASE_URL HANDOFF_SQLITE_TEMPLATE=$(SQLITE_TEMPLATE) HANDOFF_VAR_DIR=var/test-sqlite-rest \
		$(VENV)/bin/pytest --durations=15 -m "$(SQLITE_MARKERS)" $(addprefix --ignore=,$(SQLITE_WEB))

test-sqlite-web: $(STAMP) test-sqlite-template
	@echo "== test suite on SQLite (embedded default): the screens and the scenarios (console, security, sign-on, oracle, acceptance) =="
	env -u DATABASE_URL -u DELIVERY_DATABASE_URL HANDOFF_SQLITE_TEMPLATE=$(SQLITE_TEMPLATE) HANDOFF_VAR_DIR=var/test-sqlite-web \
		$(VENV)/bin/pytest --durations=15 -m "$(SQLITE_MARKERS)" $(SQLITE_WEB)

# The PostgreSQL suite in six streams that run side by side, each on databases and a var directory of its
# own (ports come from the kernel, held by each test: tests/processes.py): the tests that run for a minute
# or more (marked `long`: large backlogs through real processes, the property test, thousands of rows) in two
# halves, the other fault tests of real processes (which wait on them much of the time), the browser and demo
# tests with the hosts tests that are not long (network namespaces: they wait on their processes), and the
# rest in two halves: the web layer's tests (console, security, sign-on) and everything else. The rest is
# CPU-bound and was the critical path as one stream (about 15 of make test's 15-17 minutes on 2 cores, while
# the others waited on their processes): two halves use both cores. The long tests were the critical path as
# one stream next (21:02 of a 21:51 make test, the others done by 17:39): LONG_ORACLE, the truth oracle's
# fault run (its looks render every screen in the pytest process: 289 s and 167 s for its two seeds), the
# property test of the workflow state machine (94 s) and the replay of a thousand (67 s), about half the long
# stream's time, run in a stream of their own (docs/testing.md). Together their markers and paths select every
# test once (tests/scripts/test_make_streams.py). The truth oracle's screen checks (tests/oracle, about a fifth
# of the rest's CPU) run in the web half: measured side by side at the same load, the other half used 288 s of
# pytest CPU against the web half's 171 s, and 1.8 times its wall time.
# The two rest halves leave out the tests that ask for no database (tests/conftest.py marks them `no_database`)
# unless they need PostgreSQL: the SQLite streams run those, the same on any database (330 tests, 28 s of CPU).
# Each stream's test databases are copies of a template that `test-template` migrates once before them
# (scripts/test_template.sh; docs/testing.md has the figures).
TEST_TEMPLATE ?= handoff_template
test-template: $(STAMP) postgres
	@echo "== the PostgreSQL streams' test databases: one template, migrated once =="
	@PY=$(PY) bash scripts/test_template.sh $(TEST_TEMPLATE)

REST_MARKERS := not (faults or browser or demo or long or hosts) and (postgres or not no_database)
REST_WEB := tests/console tests/security tests/sso tests/oracle
LONG_MARKERS := long and not (browser or demo)
LONG_ORACLE := tests/oracle/test_fault_run.py tests/acceptance/test_workflow_state_machine.py tests/incidents/test_replay_at_scale.py
test-postgres: test-postgres-long test-postgres-long-oracle test-postgres-faults test-postgres-browser test-postgres-rest test-postgres-rest-web

test-postgres-processes: test-postgres-long test-postgres-long-oracle test-postgres-faults test-postgres-browser

test-postgres-long: $(STAMP) postgres pgbouncer faketime nftables test-template
	@echo "== test suite on PostgreSQL: the tests that run for a minute or more, but the oracle's fault run =="
	HANDOFF_TEST_TEMPLATE=$(TEST_TEMPLATE) DATABASE_URL="postgres:///handoff_long?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_long_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-postgres-long $(VENV)/bin/pytest --durations=15 -m "$(LONG_MARKERS)" $(addprefix --ignore=,$(LONG_ORACLE))

test-postgres-long-oracle: $(STAMP) postgres test-template
	@echo "== test suite on PostgreSQL: the oracle's fault run, the state machine and the replay at scale =="
	HANDOFF_TEST_TEMPLATE=$(TEST_TEMPLATE) DATABASE_URL="postgres:///handoff_long_oracle?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_long_oracle_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-postgres-long-oracle $(VENV)/bin/pytest --durations=15 -m "$(LONG_MARKERS)" $(LONG_ORACLE)

test-postgres-faults: $(STAMP) postgres pgbouncer faketime nftables test-template
	@echo "== test suite on PostgreSQL: the other fault tests (real processes) =="
	HANDOFF_TEST_TEMPLATE=$(TEST_TEMPLATE) DATABASE_URL="postgres:///handoff_faults?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_faults_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-postgres-faults $(VENV)/bin/pytest --durations=15 -m "faults and not long and not (browser or demo or hosts)"

test-postgres-browser: $(STAMP) postgres chromium faketime nftables test-template
	@echo "== test suite on PostgreSQL: browser and demo tests, and the hosts tests that are not long =="
	HANDOFF_TEST_TEMPLATE=$(TEST_TEMPLATE) DATABASE_URL="postgres:///handoff?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-postgres-browser $(VENV)/bin/pytest --durations=15 -m "browser or demo or (hosts and not long)"

test-postgres-rest: $(STAMP) postgres test-template
	@echo "== test suite on PostgreSQL: everything else but the web layer's =="
	HANDOFF_TEST_TEMPLATE=$(TEST_TEMPLATE) DATABASE_URL="postgres:///handoff_rest?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_rest_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-postgres-rest $(VENV)/bin/pytest --durations=15 -m "$(REST_MARKERS)" $(addprefix --ignore=,$(REST_WEB))

test-postgres-rest-web: $(STAMP) postgres test-template
	@echo "== test suite on PostgreSQL: the web layer's other tests (console, security, sign-on, oracle) =="
	HANDOFF_TEST_TEMPLATE=$(TEST_TEMPLATE) DATABASE_URL="postgres:///handoff_rest_web?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_rest_web_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-postgres-rest-web $(VENV)/bin/pytest --durations=15 -m "$(REST_MARKERS)" $(REST_WEB)

# The README's screenshots, taken by the browser tests in a real Chromium.
screenshots: $(STAMP) postgres chromium
	SCREENSHOT_DIR=docs/screenshots DATABASE_URL="postgres:///handoff?host=$(PGHOST)" \
		DELIVERY_DATABASE_URL="postgres:///handoff_delivery?host=$(PGHOST)" $(VENV)/bin/pytest -m browser

# A mutant that changes no migration copies the SQLite streams' template (an absolute path: it runs in a copy of
# the tree) instead of migrating: test-sqlite-template empties it once, before the streams and the mutants.
mutation-check: $(STAMP) test-sqlite-template
	@HANDOFF_SQLITE_TEMPLATE=$(CURDIR)/$(SQLITE_TEMPLATE) bash scripts/mutation_check.sh

# Everything runs side by side (the suites wait on their processes, servers and browsers much of the time):
# the eight suites, longest first, then the checks as slots free up; each one's output is printed whole
# when it ends, and make fails if any of them fails. scripts/cpu_time.py prints, at the end, the CPU all of
# it used (its processes' and PostgreSQL's) and the wall time that CPU allows on this machine's cores at
# best (var/test-cpu.json keeps the figures).
CHECKS := lint lock-check monitoring-check mutation-check
SUITES := test-postgres-long-oracle test-postgres-long test-postgres-faults test-postgres-rest test-postgres-rest-web test-postgres-browser test-sqlite-rest test-sqlite-web
test-suites: $(STAMP) postgres chromium pgbouncer faketime promtool
	$(PY) scripts/cpu_time.py --name 'make test' --json var/test-cpu.json -- \
		$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(SUITES) $(CHECKS)

TEST_JOBS ?= 8
test: test-suites

# Under 20 minutes on 2 cores. BENCH_DB_PREFIX names its databases (default "bench");
# BENCH_LEVERS=1 adds the lever and growth repeats (about 6 minutes more).
bench: $(STAMP) postgres
	@bash bench/run.sh

# Fills the databases `make bench`'s search section keeps (issue 39's 10,000,000 handoffs, bench/search_bench.py
# --keep) ahead of a run, so that the run only measures: about 12 minutes on 2 idle cores the first time, and
# again only when the fill, an installed package or an applied migration file changed (docs/benchmarks.md,
# "Search by client name"); about 10 s when they hold.
bench-search-10m: $(STAMP) postgres
	@set -o pipefail; mkdir -p var/bench && $(PY) bench/search_bench.py --rows 10000000 --keep --fill-only \
		| tee var/bench/search-fill.log

# Fills the databases `make bench`'s reconciliation section keeps (issue 40's 10,000,000 keys, and the 1,000,000 it
# reconciles over http: handoffs and their receiver tasks, bench/reconcile_bench.py --keep) ahead of a run, so that
# the run only reconciles: about 170 s on 2 idle cores, and again only when the fill, an installed package or an
# applied migration file changed or their rows are not the fill's (docs/reconciliation.md, "Benchmark"); a few
# seconds when they hold.
bench-reconcile-10m: $(STAMP) postgres
	@set -o pipefail; mkdir -p var/bench && { $(PY) bench/reconcile_bench.py 10000000 --keep --fill-only \
		&& $(PY) bench/reconcile_bench.py 1000000 --keep --fill-only; } | tee var/bench/reconcile-fill.log

# Fills the databases `make bench`'s console sections keep (1,000,000 handoffs each, bench/console_bench.py and
# bench/console_operators_bench.py --keep; each run measures on a copy of them) ahead of a run: about 50 s on 2
# idle cores, and again only when a fill, an installed package or an applied migration file changed, their rows
# are not the fill's, or they are over 12 hours old; a few seconds when they hold.
bench-console-kept: $(STAMP) postgres
	@set -o pipefail; mkdir -p var/bench && { $(PY) bench/console_bench.py --rows 1000000 --keep --fill-only \
		&& $(PY) bench/console_operators_bench.py --rows 1000000 --operators 20 --keep --fill-only; } \
		| tee var/bench/console-fill.log

# The truth oracle's fault run (tests/oracle/test_fault_run.py) for longer than make test's bounded one: one seed
# (SEED, a seed a failure printed; a new one when empty) for MINUTES (10 when empty). docs/console.md, "Claims a
# machine can read".
oracle: $(STAMP) postgres
	@seed="$(SEED)"; [ -n "$$seed" ] || seed=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); \
	minutes="$(MINUTES)"; [ -n "$$minutes" ] || minutes=10; \
	echo "== truth oracle: seed $$seed for $$minutes min =="; \
	DATABASE_URL="postgres:///handoff_oracle?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_oracle_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-oracle ORACLE_SEED=$$seed ORACLE_SECONDS=$$(( minutes * 60 )) \
		$(VENV)/bin/pytest -s tests/oracle/test_fault_run.py

# Faults chosen by a machine between namespaced hosts (tests/hosts/test_schedules.py) for as long as asked: one
# seed (SEED, a seed a failure printed; a new one when empty) for MINUTES (30 when empty). docs/operations.md,
# "Partitions between hosts".
soak: $(STAMP) postgres pgbouncer faketime nftables
	@seed="$(SEED)"; [ -n "$$seed" ] || seed=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); \
	minutes="$(MINUTES)"; [ -n "$$minutes" ] || minutes=30; \
	echo "== hosts soak: seed $$seed for $$minutes min =="; \
	DATABASE_URL="postgres:///handoff_soak?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_soak_delivery?host=$(PGHOST)" \
		HANDOFF_VAR_DIR=var/test-soak HOSTS_SEEDS=$$seed HOSTS_SCHEDULE_SECONDS=$$(( minutes * 60 )) \
		$(VENV)/bin/pytest -s tests/hosts/test_schedules.py

clean:
	rm -rf $(VENV) var staticfiles test-artifacts
