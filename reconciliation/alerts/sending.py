"""Sending alerts, by a periodic sweep: record new episodes, then send what is unsent, one message per
group (each page alone; the rest per workspace, kind, workflow and failure class), by e-mail and webhook.

Sending is not rollback-safe (an email cannot be unsent), so a record is claimed by a conditional
update before it is sent: two sweeps running at once do not both send it.

Every message has a stable id derived from the group keys of its records (`message_id_for`): a resend
after a lost answer carries the same id (the webhook's `webhook-id` and payload `id`, the e-mail's
Message-ID), so the receiver sees the same notification again, not a new one. A message whose sends keep
failing stops after MAX_SEND_ATTEMPTS and is counted on Health and in /metrics (`alerts_failed`).

The sweep then brings incidents in step with their causes, escalates unacknowledged pages and sends the
incidents' notifications (`incidents`, `notifications`, `delivering`).
"""

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from django.conf import settings
from django.core.mail import EmailMessage
from django.db.models import F

from approvals.selectors import operators_of
from lib.databases import DB
from outbox.clock import DbNow, db_time
from outbox.models import Handoff
from outbox.redaction import redact_text
from reconciliation.alerts.delivering import notifications_send_due
from reconciliation.alerts.episodes import record_episodes
from reconciliation.alerts.incidents import incidents_sync
from reconciliation.alerts.messages import compose
from reconciliation.alerts.notifications import incidents_escalate
from reconciliation.alerts.replay_run import replays_resume
from reconciliation.alerts.signing import signed_headers
from reconciliation.models import AlertKind, AlertRecord, AlertSeverity


@dataclass
class SweepResult:
    recorded: dict[str, int] = field(default_factory=dict)
    messages_sent: int = 0
    webhooks_sent: int = 0
    failed: int = 0
    incidents: dict[str, int] = field(default_factory=dict)


def message_id_for(records: list[AlertRecord]) -> str:
    """The message's stable id: the one a record was already sent under (a resend), else derived from
    the group keys of its records. Never random: the same alert sent twice is the same notification."""
    earlier = sorted({r.message_id for r in records if r.message_id})
    if earlier:
        return earlier[0]
    keys = "\n".join(sorted(r.group_key for r in records))
    return f"alert_{hashlib.sha256(keys.encode()).hexdigest()[:32]}"


def _operator_emails(workspace_id: int) -> set[str]:
    return {user.email for user in operators_of([workspace_id]) if user.is_active and user.email}


def _recipients(records: list[AlertRecord]) -> list[str]:
    """ALERT_EMAILS (the on-call people of every workspace), and for a workspace's message its operators
    and the owners of its handoffs: a message carries one workspace only, so nobody reads another's."""
    first = records[0]
    if first.severity == AlertSeverity.PAGE or first.workspace_id is None:
        return sorted(set(settings.ALERT_EMAILS))
    handoff_ids = [r.handoff_id for r in records if r.handoff_id] + [
        r.finding.handoff_id for r in records if r.finding_id and r.finding.handoff_id
    ]
    owners = (
        Handoff.objects.using(DB)
        .filter(pk__in=handoff_ids, workspace_id=first.workspace_id, owner__isnull=False)
        .exclude(owner__email="")
        .values_list("owner__email", flat=True)
        .distinct()
    )
    return sorted(set(settings.ALERT_EMAILS) | set(owners) | _operator_emails(first.workspace_id))


def _webhook(severity: str) -> tuple[str, str]:
    if severity == AlertSeverity.PAGE:
        return settings.ALERT_PAGE_WEBHOOK_URL, settings.ALERT_PAGE_WEBHOOK_SECRET
    return settings.ALERT_WEBHOOK_URL, settings.ALERT_WEBHOOK_SECRET


def _post_webhook(severity: str, payload: dict, client: httpx.Client) -> str:
    url, secret = _webhook(severity)
    body = json.dumps(payload, sort_keys=True, default=str)
    headers = {
        **signed_headers(body, secret=secret, message_id=payload["id"]),
        "Content-Type": "application/json",
    }
    response = client.post(url, content=body.encode(), headers=headers)
    return f"HTTP {response.status_code}"


def _claim_for_sending(records: list[AlertRecord]) -> list[AlertRecord]:
    claimed = []
    for record in records:
        if (
            AlertRecord.objects.using(DB)
            .filter(pk=record.pk, sent_at__isnull=True, send_attempts=record.send_attempts)
            .update(send_attempts=F("send_attempts") + 1)
        ):
            claimed.append(record)
    return claimed


def _send_webhook(
    severity: str, payload: dict, http_client: httpx.Client | None
) -> tuple[str, str]:
    """(status, error) of the webhook for this severity; ("", "") when none is configured."""
    url, secret = _webhook(severity)
    if not (url and secret):
        return "", ""
    client = http_client or httpx.Client(timeout=5.0)
    try:
        status = _post_webhook(severity, payload, client)
    except httpx.HTTPError as exc:
        return "failed", f"webhook: {type(exc).__name__}"
    finally:
        if http_client is None:
            client.close()
    return status, "" if status.startswith("HTTP 2") else f"webhook answered {status}"


def _send_email(kind: str, message: tuple[str, str, dict], recipients: list[str]) -> str:
    """ "" when sent, else the error."""
    subject, body, payload = message
    try:
        EmailMessage(
            subject=subject,
            body=body,
            from_email=settings.ALERT_FROM_EMAIL,
            to=recipients,
            headers={
                "X-Handoff-Alert": kind,
                "Message-ID": f"<{payload['id']}@handoff-console>",
            },
        ).send(fail_silently=False)
    except Exception as exc:  # noqa: BLE001 - any mail failure is recorded and retried next sweep
        return f"email: {type(exc).__name__}: {redact_text(str(exc))}"
    return ""


def _deliver(
    kind: str,
    severity: str,
    message: tuple[str, str, dict],
    recipients: list[str],
    http_client: httpx.Client | None,
) -> tuple[bool, str, list[str]]:
    """Send by e-mail and webhook: (e-mailed, webhook status, errors)."""
    _subject, _body, payload = message
    email_error = _send_email(kind, message, recipients) if recipients else ""
    webhook_status, webhook_error = _send_webhook(severity, payload, http_client)
    errors = [error for error in (email_error, webhook_error) if error]
    if not recipients and not webhook_status:
        errors.append(
            "no alert recipient configured (ALERT_EMAILS, ALERT_WEBHOOK_URL, ALERT_PAGE_WEBHOOK_URL)"
        )
    return bool(recipients) and not email_error, webhook_status, errors


def send_group(
    kind: str, records: list[AlertRecord], *, http_client: httpx.Client | None = None
) -> tuple[bool, bool]:
    """Send one message for the records; returns (email sent, webhook sent). Call outside transactions."""
    records = _claim_for_sending(records)
    if not records:
        return False, False
    message_id = message_id_for(records)
    recipients = _recipients(records)
    emailed, webhook_status, errors = _deliver(
        kind, records[0].severity, compose(kind, records, message_id), recipients, http_client
    )
    webhooked = webhook_status.startswith("HTTP 2")
    AlertRecord.objects.using(DB).filter(pk__in=[r.pk for r in records]).update(
        sent_at=DbNow() if emailed or webhooked else None,
        message_id=message_id,
        recipients=", ".join(recipients),
        webhook_status=webhook_status,
        last_error="; ".join(errors)[:2000],
    )
    return emailed, webhooked


def _group_key(record: AlertRecord) -> tuple:
    """One message per group: a page alone; otherwise per workspace, kind, workflow and failure class."""
    if record.severity == AlertSeverity.PAGE:
        return (record.kind, record.pk)
    if record.kind == AlertKind.RECONCILIATION:
        return (record.kind, record.workspace_id, "", "")
    return (record.kind, record.workspace_id, record.workflow, record.failure_class)


def alerts_send_due(
    *, now: datetime | None = None, limit: int = 500, http_client: httpx.Client | None = None
) -> SweepResult:
    """Record new episodes, then send every unsent one: each page alone, the rest grouped by workspace, kind,
    workflow and failure class."""
    now = now or db_time()
    result = SweepResult(recorded=record_episodes(now=now, limit=limit))
    unsent = list(
        AlertRecord.objects.using(DB)
        .unsent_due()
        .select_related("finding")
        .order_by("created_at", "pk")[:limit]
    )
    groups: dict[tuple, list[AlertRecord]] = {}
    for record in unsent:
        groups.setdefault(_group_key(record), []).append(record)
    for key, records in groups.items():
        emailed, webhooked = send_group(key[0], records, http_client=http_client)
        result.messages_sent += emailed
        result.webhooks_sent += webhooked
        if not (emailed or webhooked):
            result.failed += 1
    result.incidents = incidents_step(http_client=http_client)
    return result


def incidents_step(*, http_client: httpx.Client | None = None) -> dict[str, int]:
    """Incidents in step with their causes, unacknowledged pages escalated, notifications sent, and replays
    whose background job stalled continued."""
    synced = incidents_sync()
    escalated = incidents_escalate()
    sent = notifications_send_due(http_client=http_client)
    return {
        "opened": synced.opened,
        "paged": synced.paged,
        "resolved": synced.resolved,
        "escalated": escalated,
        "notifications_sent": sent.sent,
        "notifications_failed": sent.failed,
        "replays_resumed": replays_resume(),
    }
