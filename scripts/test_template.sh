#!/usr/bin/env bash
# The template of the PostgreSQL streams' test databases (`make test-template`, before the streams start):
# `<name>` and `<name>_delivery` made afresh and migrated once, the two databases side by side. Each stream
# then creates its test databases as copies (CREATE DATABASE ... TEMPLATE, config/test_settings.py's
# HANDOFF_TEST_TEMPLATE) instead of migrating its own: a whole migrate costs about 20 s of CPU, five streams
# paid it at once, and the long stream's first test waited 65 s for it (docs/testing.md). Also dumped as SQL
# to var/test-template/, for the private servers of tests/hosts and tests/faults.
set -euo pipefail
name=${1:?usage: test_template.sh <template name>}
PGHOST=${PGHOST:-/var/run/postgresql}
PY=${PY:-.venv/bin/python}
export PGOPTIONS="-c client_min_messages=warning"  # no NOTICE for a template that did not exist yet
# A failed migrate below leaves no dump of an older schema for a private server to load.
rm -f "var/test-template/$name.sql" "var/test-template/${name}_delivery.sql"
for db in "$name" "${name}_delivery"; do
  # No FORCE: a session still on the template (a stream copying it) fails this step instead of being cut.
  psql -h "$PGHOST" -d postgres -qAt -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS \"$db\"" -c "CREATE DATABASE \"$db\""
done
export DJANGO_SETTINGS_MODULE=config.test_settings HANDOFF_VAR_DIR=var/test-template
export DATABASE_URL="postgres:///$name?host=$PGHOST" DELIVERY_DATABASE_URL="postgres:///${name}_delivery?host=$PGHOST"
unset HANDOFF_TEST_TEMPLATE
delivery_apps=$("$PY" -c 'from config.routers import DELIVERY_APPS; print(*sorted(DELIVERY_APPS))')
[ -n "$delivery_apps" ] || { echo "test_template.sh: no app in config/routers.py's DELIVERY_APPS" >&2; exit 1; }
"$PY" manage.py migrate --no-input -v0 --database default &
default=$!
# The delivery database holds the receiver's apps alone (config/routers.py, DELIVERY_APPS): their migrations
# (and what they depend on) are applied, then every other one is recorded as applied (--fake), which is all a
# whole migrate does with them there, the router refusing their operations on that database; without Django
# rendering every app's migration states for it (7.2 s of CPU, 1.8 s this way; docs/testing.md). The two ways
# dump the same schema and record the same migrations, so the streams' migrate on a copy finds nothing to apply.
(
  for app in $delivery_apps; do
    "$PY" manage.py migrate --no-input -v0 --database delivery "$app"
  done
  "$PY" manage.py migrate --no-input -v0 --database delivery --fake
) &
delivery=$!
failed=0
wait "$default" || failed=1
wait "$delivery" || failed=1
[ "$failed" = 0 ] || exit 1
# The same as SQL, for the servers that tests start of their own (tests/hosts, tests/faults' private ones):
# they load it instead of migrating (tests/processes.py, migrated_template_dump). No owner, privileges or
# comments: a role that is no superuser can load it (tests/faults/test_database_certificates.py loads it as
# the migrations' role, which may not comment on the pg_trgm extension a superuser made).
mkdir -p var/test-template
for db in "$name" "${name}_delivery"; do
  pg_dump -h "$PGHOST" --no-owner --no-privileges --no-comments -f "var/test-template/$db.sql.new" "$db"
  mv "var/test-template/$db.sql.new" "var/test-template/$db.sql"
done
