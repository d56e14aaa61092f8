#!/usr/bin/env bash
# `make run`: migrate, load the demo, start the web app and the django-q2 cluster; Ctrl-C stops both and
# ends with status 0. Runs as in production (DEBUG off: collected static files served by whitenoise, the
# console's own 403/404/500 pages), over plain HTTP on 127.0.0.1:$PORT (default 8000).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT=${PORT:-8000}
case "$PORT" in
  ''|*[!0-9]*) echo "PORT must be a number, not '$PORT'" >&2; exit 2 ;;
esac

if [ -t 0 ] && [ -z "${HANDOFF_RUN_AS_JOB:-}" ]; then
  # Ctrl-C reaches the terminal's whole foreground process group, make included, and make then reports
  # an interrupt and fails whatever this script does. With job control on, the server runs as a job of
  # its own that owns the terminal: Ctrl-C reaches only that job, which stops everything and ends with 0.
  set -m
  status=0
  HANDOFF_RUN_AS_JOB=1 bash "$0" "$@" || status=$?
  exit "$status"
fi

mkdir -p var
if [ ! -f var/run.env ]; then
  # Local secrets, generated once and kept out of git (var/ is ignored).
  $PY - > var/run.env <<'PYEOF'
import base64, secrets
print(f"DJANGO_SECRET_KEY={secrets.token_urlsafe(48)}")
print(f"RECEIVER_SIGNING_SECRET=whsec_{base64.b64encode(secrets.token_bytes(32)).decode()}")
print(f"INTAKE_SIGNING_SECRET=whsec_{base64.b64encode(secrets.token_bytes(32)).decode()}")
print(f"METRICS_TOKEN={secrets.token_urlsafe(24)}")
PYEOF
fi
if ! grep -q '^ACCOUNTS_API_TOKEN=' var/run.env; then
  # The bundled accounts service's bearer token (a var/run.env from before it existed has none).
  $PY -c 'import secrets; print(f"ACCOUNTS_API_TOKEN={secrets.token_urlsafe(24)}")' >> var/run.env
fi
set -a; source var/run.env; set +a
export DJANGO_DEBUG=${DJANGO_DEBUG:-0}
# Plain HTTP on localhost: no HTTPS redirect, no secure-only cookies (a deployment keeps the default, on).
export DJANGO_SECURE=${DJANGO_SECURE:-0}
export DJANGO_ALLOWED_HOSTS=${DJANGO_ALLOWED_HOSTS:-127.0.0.1,localhost}
export EMAIL_BACKEND=${EMAIL_BACKEND:-django.core.mail.backends.console.EmailBackend}
export RECEIVER_URL=${RECEIVER_URL:-http://127.0.0.1:$PORT/delivery/api}
# The bundled receiver tells the console when a task's work changes (docs/reconciliation.md, "Status events").
export RECEIVER_STATUS_EVENTS_URL=${RECEIVER_STATUS_EVENTS_URL:-http://127.0.0.1:$PORT/reconciliation/api/destinations/receiver/status-events}
export CONSOLE_BASE_URL=${CONSOLE_BASE_URL:-http://127.0.0.1:$PORT}
# The demo's three destinations (demo/destinations.json): the bundled receiver and accounts service on this
# port, and the welcome pack by e-mail to the demo's SMTP server, whose mailbox /delivery/mailbox/ shows.
export PORT
export DEMO_SMTP_PORT=${DEMO_SMTP_PORT:-$((PORT + 25))}
export DEMO_MAILBOX_DIR=${DEMO_MAILBOX_DIR:-$(pwd)/var/mailbox}
$PY manage.py migrate --noinput -v0
$PY manage.py migrate --database delivery --noinput -v0
$PY manage.py collectstatic --noinput -v0
$PY manage.py demo --destinations demo/destinations.json
$PY manage.py schedule_sweeps
$PY manage.py schedule_reconciliation

# Each server runs in a session of its own (its pid is its process group), so a Ctrl-C reaches this
# script only, and stopping a server stops all of its children: gunicorn's workers, the cluster's.
setsid .venv/bin/gunicorn config.wsgi --bind "127.0.0.1:$PORT" --workers 2 --threads 4 --timeout 60 \
  --graceful-timeout 5 --access-logfile - --log-level warning &
web=$!
setsid $PY manage.py qcluster &
workers=$!
setsid $PY manage.py demo_mailbox &
mailbox=$!

stop() {
  trap - INT TERM
  echo
  echo "stopping the web app and the workers"
  # Each main process stops its own children (a signal to all of them at once leaves the cluster hanging).
  kill -TERM "$web" "$workers" "$mailbox" 2>/dev/null || true
  # Whatever has not stopped in fifteen seconds (a worker stuck in a call) is ended.
  ( sleep 15; kill -KILL -- "-$web" "-$workers" "-$mailbox" 2>/dev/null ) &
  local deadline=$!
  wait "$web" "$workers" "$mailbox" 2>/dev/null || true
  pkill -P "$deadline" 2>/dev/null || true
  kill "$deadline" 2>/dev/null || true
  # Children that outlived their server's main process.
  kill -KILL -- "-$web" "-$workers" "-$mailbox" 2>/dev/null || true
  echo "stopped"
  exit 0
}
trap stop INT TERM
echo "Console: http://127.0.0.1:$PORT/  ·  Admin: http://127.0.0.1:$PORT/admin/  ·  Ctrl-C stops everything"
echo "Destinations: http://127.0.0.1:$PORT/destinations/  ·  Demo mailbox: http://127.0.0.1:$PORT/delivery/mailbox/"
echo "Forgot the demo password? .venv/bin/python manage.py demo_passwords (in another terminal) sets new ones."
# Either server ending on its own ends the other too; `wait` returns early when a signal arrives.
wait -n "$web" "$workers" "$mailbox" || true
stop
