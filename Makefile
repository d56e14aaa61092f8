# The two commands: `make run` and `make test`. Everything else is what they are made of.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APPS := approvals console config delivery httpapi lib outbox reconciliation
PGHOST ?= /var/run/postgresql
export PGHOST

.PHONY: run test test-sqlite test-postgres lint mutation-check postgres chromium bench venv clean screenshots

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	@bash scripts/run_local.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/check_structure.py
	@out=$$($(VENV)/bin/radon cc -n C $(APPS)); if [ -n "$$out" ]; then echo "$$out"; echo "radon: rank C or worse"; exit 1; fi

postgres:
	@bash scripts/postgres.sh

chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test-sqlite: $(STAMP)
	@echo "== test suite on SQLite (embedded default) =="
	env -u DATABASE_URL -u DELIVERY_DATABASE_URL $(VENV)/bin/pytest -m "not postgres and not browser and not demo"

test-postgres: $(STAMP) postgres chromium
	@echo "== test suite on PostgreSQL (incl. fault and browser tests) =="
	DATABASE_URL="postgres:///handoff?host=$(PGHOST)" DELIVERY_DATABASE_URL="postgres:///handoff_delivery?host=$(PGHOST)" \
		$(VENV)/bin/pytest --durations=15

# The README's screenshots, taken by the browser tests in a real Chromium.
screenshots: $(STAMP) postgres chromium
	SCREENSHOT_DIR=docs/screenshots DATABASE_URL="postgres:///handoff?host=$(PGHOST)" \
		DELIVERY_DATABASE_URL="postgres:///handoff_delivery?host=$(PGHOST)" $(VENV)/bin/pytest -m browser

mutation-check: $(STAMP)
	@bash scripts/mutation_check.sh

test: lint test-sqlite test-postgres mutation-check

# Under 20 minutes on 2 cores. BENCH_DB_PREFIX names its databases (default "bench");
# BENCH_LEVERS=1 adds the lever and growth repeats (about 6 minutes more).
bench: $(STAMP) postgres
	@bash bench/run.sh

clean:
	rm -rf $(VENV) var staticfiles test-artifacts
