"""Settings of incidents and their notifications (docs/incidents.md); imported by `config.settings`."""

import os

from config.env import env_int

# The organisation-wide on-call (a user name): owns and is paged for the failures of a workspace with no
# operator, when the workflow's pilot brief names no owner. Unset with such a workspace: a start-up warning.
HANDOFF_FALLBACK_ON_CALL = os.environ.get("HANDOFF_FALLBACK_ON_CALL", "").strip()

# Live findings of a corruption kind (payload_mismatch, missing_at_receiver) at which their incident pages.
ALERT_CORRUPTION_THRESHOLD = env_int("ALERT_CORRUPTION_THRESHOLD", 5)
# Security events of one kind (refused signatures, replays, sign-in lockouts) within the window that page.
ALERT_SECURITY_THRESHOLD = env_int("ALERT_SECURITY_THRESHOLD", 10)
ALERT_SECURITY_WINDOW_MINUTES = env_int("ALERT_SECURITY_WINDOW_MINUTES", 5)
# Rejected triggers this recent become an incident with an owner and an SLA.
ALERT_REJECTED_TRIGGER_DAYS = env_int("ALERT_REJECTED_TRIGGER_DAYS", 7)
# The SLA of an incident that does not page (a queue): hours from opening.
ALERT_INCIDENT_SLA_HOURS = env_int("ALERT_INCIDENT_SLA_HOURS", 4)
# A failure an operator holds (a case hold, docs/console.md "hold / resume") neither opens nor escalates an
# incident for this many hours from the hold's start: the owner is acting on it. Past that, or once the hold
# ends, it is a failure like any other again: a hold never hides one for ever.
ALERT_HOLD_QUIET_HOURS = env_int("ALERT_HOLD_QUIET_HOURS", 8)
# Escalation, unless a workspace's EscalationPolicy row says otherwise: a page not acknowledged within
# this many seconds goes to the next level; at most this many pages per incident.
ALERT_ESCALATION_SECONDS = env_int("ALERT_ESCALATION_SECONDS", 900)
ALERT_ESCALATION_MAX_PAGES = env_int("ALERT_ESCALATION_MAX_PAGES", 4)
# A notification is retried with backoff (base doubling up to the cap) for this long, then it has failed.
ALERT_NOTIFICATION_RETRY_BASE_SECONDS = env_int("ALERT_NOTIFICATION_RETRY_BASE_SECONDS", 10)
ALERT_NOTIFICATION_RETRY_CAP_SECONDS = env_int("ALERT_NOTIFICATION_RETRY_CAP_SECONDS", 300)
ALERT_NOTIFICATION_MAX_ATTEMPTS = env_int("ALERT_NOTIFICATION_MAX_ATTEMPTS", 8)
ALERT_NOTIFICATION_TIMEOUT_SECONDS = env_int("ALERT_NOTIFICATION_TIMEOUT_SECONDS", 5)
# Seconds an incident waits before anyone is told, by severity: a cause that ends within the delay (a
# blip the breaker or a retry heals) sends nothing. Measured on the database clock from the incident's opening.
ALERT_NOTIFY_DELAY_SECONDS = {
    "page": env_int("ALERT_PAGE_DELAY_SECONDS", 120),
    "queue": env_int("ALERT_QUEUE_DELAY_SECONDS", 300),
}
# An acknowledgement holds this long; if the cause still holds then, the incident is open again and pages.
ALERT_ACK_LAPSE_SECONDS = env_int("ALERT_ACK_LAPSE_SECONDS", 4 * 3600)
# A destination's backlog while nothing fails: its oldest due handoff this many seconds overdue, or this
# many due handoffs waiting, opens a backlog incident (a dispatcher down, a limit set too low).
ALERT_BACKLOG_AGE_SECONDS = env_int("ALERT_BACKLOG_AGE_SECONDS", 900)
ALERT_BACKLOG_DEPTH = env_int("ALERT_BACKLOG_DEPTH", 5000)
