#!/usr/bin/env bash
# `make run`: migrate, load the demo, start the web app and the django-q2 cluster; Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
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
set -a; source var/run.env; set +a
export DJANGO_DEBUG=${DJANGO_DEBUG:-1}
export RECEIVER_URL=${RECEIVER_URL:-http://127.0.0.1:8000/delivery/api}
$PY manage.py migrate --noinput -v0
$PY manage.py migrate --database delivery --noinput -v0
$PY manage.py demo
$PY manage.py schedule_sweeps
$PY manage.py schedule_reconciliation
.venv/bin/gunicorn config.wsgi --bind 127.0.0.1:8000 --workers 2 --threads 4 --timeout 60 \
  --access-logfile - --log-level warning &
web=$!
$PY manage.py qcluster &
workers=$!
stop() {
  trap - INT TERM EXIT
  echo "stopping the web app and the workers"
  kill -TERM "$web" "$workers" 2>/dev/null
  for _ in $(seq 1 40); do
    kill -0 "$web" 2>/dev/null || kill -0 "$workers" 2>/dev/null || break
    sleep 0.25
  done
  # Whatever did not stop in ten seconds (a worker stuck in a call) is ended.
  pkill -KILL -P "$web" 2>/dev/null; pkill -KILL -P "$workers" 2>/dev/null
  kill -KILL "$web" "$workers" 2>/dev/null
  wait 2>/dev/null
  exit 0
}
trap stop INT TERM EXIT
echo "Console: http://127.0.0.1:8000/  ·  Admin: http://127.0.0.1:8000/admin/  ·  Ctrl-C stops both"
wait -n
