"""Settings of intake (signed triggers), reconciliation and alerts; imported by `config.settings`."""

import os

from django.core.exceptions import ImproperlyConfigured

from config.env import env_float, env_int

# --- Intake (approvals app) ------------------------------------------------------------
# INTAKE_SIGNING_SECRET (above) verifies signed triggers at POST /approvals/api/triggers.
INTAKE_SIGNING_SECRET_PREVIOUS = os.environ.get("INTAKE_SIGNING_SECRET_PREVIOUS", "")
INTAKE_MAX_BODY_BYTES = env_int("INTAKE_MAX_BODY_BYTES", 256 * 1024)
INTAKE_MAX_JSON_DEPTH = env_int("INTAKE_MAX_JSON_DEPTH", 32)
INTAKE_MAX_PAYLOAD_BYTES = env_int("INTAKE_MAX_PAYLOAD_BYTES", 64 * 1024)
# The account recorded as requester of requests that arrive as triggers (created inactive on first use).
INTAKE_SENDER_USERNAME = os.environ.get("INTAKE_SENDER_USERNAME", "intake")
# Mode of a workflow that has no stored mode: "observe" (the default: a new workflow is observed before its
# owner switches it live), "limited" (nothing allowed yet) or "live". Another mode needs its reason in
# WORKFLOW_DEFAULT_MODE_REASON (docs/observation.md, "A new workflow starts in observe").
WORKFLOW_DEFAULT_MODE = os.environ.get("WORKFLOW_DEFAULT_MODE", "observe")
WORKFLOW_DEFAULT_MODE_REASON = os.environ.get("WORKFLOW_DEFAULT_MODE_REASON", "").strip()
if WORKFLOW_DEFAULT_MODE not in {"observe", "limited", "live"}:
    raise ImproperlyConfigured("WORKFLOW_DEFAULT_MODE must be observe, limited or live")
if WORKFLOW_DEFAULT_MODE != "observe" and not WORKFLOW_DEFAULT_MODE_REASON:
    raise ImproperlyConfigured(
        f"WORKFLOW_DEFAULT_MODE_REASON: required with WORKFLOW_DEFAULT_MODE={WORKFLOW_DEFAULT_MODE} "
        "(why new workflows skip observation)"
    )

# --- Reconciliation and alerts ---------------------------------------------------------
# Rows per page on each side of the merge: memory is bounded by two pages, whatever the table size.
RECONCILIATION_BATCH_SIZE = env_int("RECONCILIATION_BATCH_SIZE", 1000)
# Point lookups per run to confirm cross-side findings (each is one receiver call).
RECONCILIATION_CONFIRM_LIMIT = env_int("RECONCILIATION_CONFIRM_LIMIT", 1000)
# The backstop's cadence (django-q2 schedule "reconciliation", `manage.py schedule_reconciliation`): a change
# the receiver did not send as a status event is found within this long. A full pass at 1,000,000 keys
# takes about 16 s (docs/benchmarks.md), so every 5 minutes costs little.
RECONCILIATION_EVERY_MINUTES = env_int("RECONCILIATION_EVERY_MINUTES", 5)
# A delivered handoff whose task is still open or in progress this long after delivery is a finding.
HANDOFF_WORK_DEADLINE_HOURS = env_float("HANDOFF_WORK_DEADLINE_HOURS", 72.0)
ALERT_SEND_EVERY_MINUTES = env_int("ALERT_SEND_EVERY_MINUTES", 1)
# Incidents are the one way a person is told (docs/incidents.md). These seed channel rows for every
# workspace (the sweep keeps them in step): each address an e-mail channel told of every incident; the
# webhooks signed channels (the secret named, read from the environment at send time), the page one told of
# pages only, the other of every incident.
ALERT_EMAILS = [a.strip() for a in os.environ.get("ALERT_EMAILS", "").split(",") if a.strip()]
ALERT_FROM_EMAIL = os.environ.get("ALERT_FROM_EMAIL", "handoff-console@localhost")
# The mail server the product's own e-mails go through (the smtp kind's destinations of approval notices and
# e-mail alert channels); `make run` points it at the demo mailbox.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
# The CA the mail server's certificate is checked against (a file; empty: the system's CAs).
EMAIL_CA_FILE = os.environ.get("EMAIL_CA_FILE", "")
# The destination row (smtp kind, through EMAIL_HOST) the approval deadlines' e-mails are handed off to.
APPROVAL_MAIL_DESTINATION = os.environ.get("APPROVAL_MAIL_DESTINATION", "approval-mail")
ALERT_WEBHOOK_URL = os.environ.get("ALERT_WEBHOOK_URL", "")
ALERT_WEBHOOK_SECRET = os.environ.get("ALERT_WEBHOOK_SECRET", "")
ALERT_PAGE_WEBHOOK_URL = os.environ.get("ALERT_PAGE_WEBHOOK_URL", "")
ALERT_PAGE_WEBHOOK_SECRET = os.environ.get("ALERT_PAGE_WEBHOOK_SECRET", "")
# "Many at once": this many handoffs of one cause needing a person page (fewer are a queue with an SLA).
ALERT_WIDESPREAD_THRESHOLD = env_int("ALERT_WIDESPREAD_THRESHOLD", 20)
# Absolute base of the links in alerts (the console as on-call people reach it).
CONSOLE_BASE_URL = os.environ.get("CONSOLE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

# Status events: the receiver tells the source when a task's work changes (docs/reconciliation.md).
from config.settings.status_events import *  # noqa: E402,F403
