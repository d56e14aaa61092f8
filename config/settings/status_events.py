"""Status events: the receiver tells the source when a task's work changes (imported by `config.settings`)."""

import os

from config.env import env_float, env_int

# Where the bundled receiver sends its signed status events; empty: it sends none (the source's
# reconciliation, every RECONCILIATION_EVERY_MINUTES, is then the only way it hears of a change).
RECEIVER_STATUS_EVENTS_URL = os.environ.get("RECEIVER_STATUS_EVENTS_URL", "")
# The secret both sides sign and verify events with; unset, the receiver's signing secret.
RECEIVER_EVENTS_SIGNING_SECRET = os.environ.get("RECEIVER_EVENTS_SIGNING_SECRET", "") or (
    os.environ.get("RECEIVER_SIGNING_SECRET", "")
)
RECEIVER_EVENTS_SIGNING_SECRET_PREVIOUS = os.environ.get(
    "RECEIVER_EVENTS_SIGNING_SECRET_PREVIOUS", ""
)
RECEIVER_EVENTS_TIMEOUT_SECONDS = env_float("RECEIVER_EVENTS_TIMEOUT_SECONDS", 5.0)
# Sendings of one event by the process that made the change; `manage.py send_status_events` sends the rest.
RECEIVER_EVENTS_MAX_ATTEMPTS = env_int("RECEIVER_EVENTS_MAX_ATTEMPTS", 8)
# Largest status-event body the source reads.
STATUS_EVENTS_MAX_BODY_BYTES = env_int("STATUS_EVENTS_MAX_BODY_BYTES", 16 * 1024)
