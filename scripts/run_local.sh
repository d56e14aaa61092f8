#!/usr/bin/env bash
# `make run`: migrate, load the demo, start the web app and the django-q2 cluster; Ctrl-C stops both and
# ends with status 0. Runs as in production (DEBUG off: collected static files served by whitenoise, the
# console's own 403/404/500 pages), over plain HTTP on 127.0.0.1:$PORT (default 8000). HANDOFF_WEB_FD: a
# socket bound to that port by whoever starts this script, for the web app to listen on instead of binding
# it (the tests hold their ports so that nothing else takes them: tests/processes.py).
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
# The port this demo serves on, for `scripts/manage.sh` in another terminal.
echo "$PORT" > var/run.port
source scripts/local_env.sh
# Migrations of both databases, static files, the demo, its alert channels and the schedules, in one
# process (console/management/commands/run_setup.py: each manage.py start costs seconds). The demo's report
# (its password on a line of its own), its only stdout, is printed last, under the addresses, instead of
# amid the start-up.
demo_report=$($PY manage.py run_setup --destinations demo/destinations.json)

# Each server runs in a session of its own (its pid is its process group), so a Ctrl-C reaches this
# script only, and stopping a server stops all of its children: gunicorn's workers, the cluster's.
# Their logs go to files under var/log (truncated at each start), so that nothing scrolls the addresses and
# the password away: the terminal ends with them. Each file is readable by its owner and group only.
source scripts/log_files.sh
open_log_files var/log web workers mailbox alert-sink
bind="127.0.0.1:$PORT"
if [ -n "${HANDOFF_WEB_FD:-}" ]; then bind="fd://$HANDOFF_WEB_FD"; fi
setsid .venv/bin/gunicorn config.wsgi --bind "$bind" --workers 2 --threads 4 --timeout 60 \
  --graceful-timeout 5 --access-logfile - --log-level warning > var/log/web.log 2>&1 &
web=$!
setsid $PY manage.py qcluster > var/log/workers.log 2>&1 &
workers=$!
setsid $PY manage.py demo_mailbox > var/log/mailbox.log 2>&1 &
mailbox=$!
setsid $PY manage.py demo_alert_sink > var/log/alert-sink.log 2>&1 &
alerts=$!

stop() {
  trap - INT TERM
  echo
  echo "stopping the web app and the workers"
  # Each main process stops its own children (a signal to all of them at once leaves the cluster hanging).
  kill -TERM "$web" "$workers" "$mailbox" "$alerts" 2>/dev/null || true
  # Whatever has not stopped in fifteen seconds (a worker stuck in a call) is ended.
  ( sleep 15; kill -KILL -- "-$web" "-$workers" "-$mailbox" "-$alerts" 2>/dev/null ) &
  local deadline=$!
  wait "$web" "$workers" "$mailbox" "$alerts" 2>/dev/null || true
  pkill -P "$deadline" 2>/dev/null || true
  kill "$deadline" 2>/dev/null || true
  # Children that outlived their server's main process.
  kill -KILL -- "-$web" "-$workers" "-$mailbox" "-$alerts" 2>/dev/null || true
  echo "stopped"
  exit 0
}
trap stop INT TERM

# The addresses and the password are printed once the web app answers, last: every server is started by
# then and writes to its file, so these lines stay on screen.
echo "starting the web app, the workers, the demo mailbox and the demo alert sink (logs: var/log/)"
if ! $PY - "$PORT" "$web" <<'PYEOF'
import os, signal, sys, time, urllib.request

signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C while waiting: no traceback, the script stops all
url, web = f"http://127.0.0.1:{sys.argv[1]}/accounts/login/", int(sys.argv[2])
deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    try:
        os.kill(web, 0)
    except OSError:
        sys.exit(1)
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.3)
sys.exit(1)
PYEOF
then
  echo "The web app has not answered yet: see var/log/web.log"
fi
echo
echo "Logs of the servers: var/log/ (web.log, workers.log, mailbox.log, alert-sink.log)"
echo "Admin: http://127.0.0.1:$PORT/admin/  ·  Destinations: http://127.0.0.1:$PORT/destinations/  ·  Demo mailbox: http://127.0.0.1:$PORT/delivery/mailbox/"
echo "Incidents: http://127.0.0.1:$PORT/incidents/  ·  Demo alert sink (what the pager got): http://127.0.0.1:$DEMO_ALERT_PORT/"
echo "In another terminal: scripts/manage.sh demo_receiver_outage --seconds 60   (the receiver down for a minute: an outage as the console shows it)"
echo "In another terminal: scripts/manage.sh demo_passwords   (new demo passwords, printed)"
echo "$demo_report"
echo "Console: http://127.0.0.1:$PORT/   (Ctrl-C stops everything)"
# Either server ending on its own ends the other too; `wait` returns early when a signal arrives.
wait -n "$web" "$workers" "$mailbox" "$alerts" || true
echo "a server stopped on its own: its log is under var/log/"
stop
