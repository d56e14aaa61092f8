# Sourced by `make run` (scripts/run_local.sh) and scripts/manage.sh: the demo's local settings. Expects the
# repository as the working directory, PY and PORT set. Production sets its own environment instead.
mkdir -p var
if [ ! -f var/run.env ]; then
  # Local secrets, generated once and kept out of git (var/ is ignored), readable by their owner only.
  (umask 077 && $PY - > var/run.env) <<'PYEOF'
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
if ! grep -q '^DEMO_ALERT_WEBHOOK_SECRET=' var/run.env; then
  # The signing secret of the demo's page channel (docs/incidents.md, "The demo").
  $PY -c 'import base64, secrets; print(f"DEMO_ALERT_WEBHOOK_SECRET=whsec_{base64.b64encode(secrets.token_bytes(32)).decode()}")' >> var/run.env
fi
if ! grep -q '^HANDOFF_DEST_RECEIVER_EVENTS_SECRET=' var/run.env; then
  # The secret of the bundled receiver's status events: the demo's receiver destination names it.
  $PY -c 'import base64, secrets; print(f"HANDOFF_DEST_RECEIVER_EVENTS_SECRET=whsec_{base64.b64encode(secrets.token_bytes(32)).decode()}")' >> var/run.env
fi
# A var/run.env from before it was created owner-only is made so.
chmod 0600 var/run.env
set -a; source var/run.env; set +a
# The bundled receiver signs its status events with it (its own setting, delivery/status_events.py).
export RECEIVER_EVENTS_SIGNING_SECRET=$HANDOFF_DEST_RECEIVER_EVENTS_SECRET
# The demo's accounts destination sends the token the bundled accounts service accepts; a destination reads
# only HANDOFF_DEST_* variables (docs/destinations.md, "Secrets").
export HANDOFF_DEST_ACCOUNTS_TOKEN=${HANDOFF_DEST_ACCOUNTS_TOKEN:-$ACCOUNTS_API_TOKEN}
export DJANGO_DEBUG=${DJANGO_DEBUG:-0}
# Plain HTTP on localhost: no HTTPS redirect, no secure-only cookies (a deployment keeps the default, on).
export DJANGO_SECURE=${DJANGO_SECURE:-0}
export DJANGO_ALLOWED_HOSTS=${DJANGO_ALLOWED_HOSTS:-127.0.0.1,localhost}
export EMAIL_BACKEND=${EMAIL_BACKEND:-django.core.mail.backends.console.EmailBackend}
export RECEIVER_URL=${RECEIVER_URL:-http://127.0.0.1:$PORT/delivery/api}
# The bundled receiver tells the console when a task's work changes (docs/reconciliation.md, "Status events").
export RECEIVER_STATUS_EVENTS_URL=${RECEIVER_STATUS_EVENTS_URL:-http://127.0.0.1:$PORT/reconciliation/api/destinations/receiver/status-events}
export CONSOLE_BASE_URL=${CONSOLE_BASE_URL:-http://127.0.0.1:$PORT}
# The demo's onboarding workflow sends from the start, so that a newcomer sees handoffs delivered; its observed
# workflow is stored in observe by the demo itself. A deployment leaves the default: new workflows observe.
export WORKFLOW_DEFAULT_MODE=${WORKFLOW_DEFAULT_MODE:-live}
export WORKFLOW_DEFAULT_MODE_REASON=${WORKFLOW_DEFAULT_MODE_REASON:-"the demo (make run): onboarding sends from the start so that a newcomer sees deliveries"}
# The demo's three destinations (demo/destinations.json): the bundled receiver and accounts service on this
# port, and the welcome pack by e-mail to the demo's SMTP server, whose mailbox /delivery/mailbox/ shows.
export PORT
export DEMO_SMTP_PORT=${DEMO_SMTP_PORT:-$((PORT + 25))}
export DEMO_MAILBOX_DIR=${DEMO_MAILBOX_DIR:-$(pwd)/var/mailbox}
# The product's own e-mails (approval reminders with their links, e-mail alert channels) to that mailbox too.
export EMAIL_HOST=${EMAIL_HOST:-127.0.0.1}
export EMAIL_PORT=${EMAIL_PORT:-$DEMO_SMTP_PORT}
# The demo's receiver of alerts (manage.py demo_alert_sink): workspace 7's page and queue channels send to it.
export DEMO_ALERT_PORT=${DEMO_ALERT_PORT:-$((PORT + 26))}
export DEMO_ALERT_DIR=${DEMO_ALERT_DIR:-$(pwd)/var/demo-alerts}
# The demo tells its channels 20 s after an incident opens (a deployment waits 120 s for a page, 300 s for a
# queue): long enough that a blip the breaker heals tells nobody, short enough to watch (docs/incidents.md).
export ALERT_PAGE_DELAY_SECONDS=${ALERT_PAGE_DELAY_SECONDS:-20}
export ALERT_QUEUE_DELAY_SECONDS=${ALERT_QUEUE_DELAY_SECONDS:-20}
