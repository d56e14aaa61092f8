#!/usr/bin/env bash
# Make a local PostgreSQL available through the unix socket: install it where missing, start the
# cluster when it is down, and create a superuser role for the current user (peer authentication).
set -euo pipefail
PGHOST=${PGHOST:-/var/run/postgresql}
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "installing PostgreSQL with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main"' | grep -q .; then
  # C collation: reconciliation merges the two sides in code-point order of the action keys.
  pg_createcluster --locale C.UTF-8 "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" && $4=="online"' | grep -q .; then
  # A cluster started here takes more connections than PostgreSQL's default 100: `make test` runs eight
  # streams with their dispatchers and servers side by side, and other people's work may share the
  # cluster. A cluster that is already running is left as its owner configured it.
  pg_ctlcluster --skip-systemctl-redirect "$version" main start -- \
    -o "-c max_connections=${HANDOFF_PG_MAX_CONNECTIONS:-300}"
fi
for _ in $(seq 1 30); do pg_isready -q -h "$PGHOST" && break; sleep 0.5; done
me=$(id -un)
if ! psql -h "$PGHOST" -d postgres -Atc "select 1" >/dev/null 2>&1; then
  su postgres -c "createuser -s $me" 2>/dev/null || true
fi
psql -h "$PGHOST" -d postgres -Atc "select 'postgres ready: ' || version()" | cut -c1-60
