"""Alerts an on-call person can act on, sent by a periodic sweep.

The sweep looks for alertable episodes (a handoff entered needs_attention, a handoff passed its SLA,
a reconciliation finding opened), records each once under a unique group key, then sends what is
unsent: one message per (kind, workflow, failure class), listing each handoff with the workflow,
the instance (action key), the last successful step, the failure class, the affected record, the
safest next action and a link. An episode that persists is not sent again; a handoff that fails
again later is a new episode. Everything shown goes through the redaction function.

Sending is not rollback-safe (an email cannot be unsent), so a record is claimed by a conditional
update before it is sent: two sweeps running at once do not both send it.
"""

import json
import logging
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from urllib.parse import urlencode

import httpx
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef
from django.urls import reverse
from django.utils import timezone

from approvals.selectors import operators_of
from outbox.models import OPEN_STATES, Handoff, HandoffState
from outbox.redaction import redact_text
from outbox.selectors import last_successful_step
from outbox.signing import signed_headers
from reconciliation import next_actions
from reconciliation.models import AlertKind, AlertRecord, AlertSeverity, Finding, FindingStatus
from reconciliation.paging import page_episodes, page_record_fields, render_page

log = logging.getLogger(__name__)
DB = "default"
S = HandoffState
MAX_SEND_ATTEMPTS = 3


@dataclass(frozen=True)
class AlertItem:
    workflow: str
    instance: str
    last_successful_step: str
    failure_class: str
    affected_record: str
    next_action: str
    link: str
    detail: str = ""


@dataclass
class SweepResult:
    recorded: dict[str, int] = field(default_factory=dict)
    messages_sent: int = 0
    webhooks_sent: int = 0
    failed: int = 0


def _absolute(path: str) -> str:
    return f"{settings.CONSOLE_BASE_URL}{path}"


def handoff_link(handoff_id: int) -> str:
    return _absolute(reverse("outbox:detail", args=[handoff_id]))


def handoff_item(handoff: Handoff) -> AlertItem:
    failure = handoff.failure_class or "none"
    if handoff.reason_code:
        failure = f"{failure} ({handoff.reason_code})"
    return AlertItem(
        workflow=handoff.workflow,
        instance=handoff.action_key,
        last_successful_step=last_successful_step(handoff),
        failure_class=failure,
        affected_record=f"{handoff.source_ref}, workspace {handoff.workspace_id}",
        next_action=next_actions.for_handoff(handoff),
        link=handoff_link(handoff.pk),
        detail=redact_text(handoff.last_error)[:500],
    )


def finding_item(finding: Finding, handoff: Handoff | None) -> AlertItem:
    if handoff is not None:
        step, record, link = (
            last_successful_step(handoff),
            f"{handoff.source_ref}, workspace {handoff.workspace_id}",
            handoff_link(handoff.pk),
        )
    else:
        task = finding.receiver_evidence.get("task_id")
        step = f"receiver holds task {task}" if task else "approved at the source; no outbox row"
        request_id = finding.source_evidence.get("request_id")
        record = f"request id {request_id}" if request_id else f"receiver task {task}"
        link = _absolute(
            reverse("reconciliation:findings") + "?" + urlencode({"q": finding.action_key})
        )
    why = finding.source_evidence.get("why", "")
    return AlertItem(
        workflow=finding.workflow or "unknown",
        instance=finding.action_key,
        last_successful_step=step,
        failure_class=f"reconciliation: {finding.kind}",
        affected_record=record,
        next_action=finding.next_action,
        link=link,
        detail=redact_text(why),
    )


# --- Finding what to alert on --------------------------------------------------------------


def _claim_episode(**fields) -> bool:
    """Record one episode; False when it was recorded before (by this or a concurrent sweep)."""
    try:
        with transaction.atomic(using=DB):
            AlertRecord.objects.using(DB).create(**fields)
    except IntegrityError:
        return False
    return True


def _record_handoff_episodes(kind: str, handoffs, episode_field: str, *, limit: int) -> int:
    already = AlertRecord.objects.using(DB).filter(
        kind=kind, handoff_id=OuterRef("pk"), episode_at=OuterRef(episode_field)
    )
    candidates = (
        handoffs.filter(~Exists(already))
        .order_by(episode_field, "pk")
        .values_list(
            "pk", episode_field, "action_key", "workflow", "failure_class", "workspace_id"
        )[:limit]
    )
    recorded = 0
    for pk, episode, key, workflow, failure_class, workspace_id in candidates:
        recorded += _claim_episode(
            kind=kind,
            handoff_id=pk,
            episode_at=episode,
            group_key=f"{kind}:{pk}:{episode.isoformat()}",
            action_key=key,
            workflow=workflow,
            failure_class=failure_class,
            workspace_id=workspace_id,
        )
    return recorded


def _record_findings(*, limit: int) -> int:
    already = AlertRecord.objects.using(DB).filter(
        kind=AlertKind.RECONCILIATION, finding_id=OuterRef("pk")
    )
    candidates = (
        Finding.objects.using(DB)
        .filter(status=FindingStatus.OPEN)
        .filter(~Exists(already))
        .order_by("pk")
        .values_list("pk", "action_key", "workflow", "kind", "workspace_id")[:limit]
    )
    recorded = 0
    for pk, key, workflow, kind, workspace_id in candidates:
        recorded += _claim_episode(
            kind=AlertKind.RECONCILIATION,
            finding_id=pk,
            group_key=f"finding:{pk}",
            action_key=key,
            workflow=workflow,
            failure_class=kind,
            workspace_id=workspace_id,
        )
    return recorded


def record_episodes(*, now: datetime, limit: int = 500) -> dict[str, int]:
    handoffs = Handoff.objects.using(DB)
    return {
        AlertKind.NEEDS_ATTENTION: _record_handoff_episodes(
            AlertKind.NEEDS_ATTENTION,
            handoffs.filter(state=S.NEEDS_ATTENTION, attention_since__isnull=False),
            "attention_since",
            limit=limit,
        ),
        AlertKind.SLA_BREACH: _record_handoff_episodes(
            AlertKind.SLA_BREACH,
            handoffs.filter(state__in=OPEN_STATES, sla_due_at__lt=now),
            "sla_due_at",
            limit=limit,
        ),
        AlertKind.RECONCILIATION: _record_findings(limit=limit),
        "pages": sum(
            _claim_episode(**page_record_fields(episode)) for episode in page_episodes(now=now)
        ),
    }


# --- Sending ---------------------------------------------------------------------------------

SUBJECTS = {
    AlertKind.NEEDS_ATTENTION: "{n} handoff(s) need attention: {workflow}, {failure}",
    AlertKind.SLA_BREACH: "SLA breached for {n} handoff(s): {workflow}, {failure}",
    AlertKind.RECONCILIATION: "Reconciliation found {n} new problem(s)",
}


def _items_for(records: list[AlertRecord]) -> list[AlertItem]:
    handoff_ids = {r.handoff_id for r in records if r.handoff_id} | {
        r.finding.handoff_id for r in records if r.finding_id and r.finding.handoff_id
    }
    handoffs = Handoff.objects.using(DB).in_bulk(handoff_ids)
    items = []
    for record in records:
        if record.finding_id:
            items.append(finding_item(record.finding, handoffs.get(record.finding.handoff_id)))
        elif record.handoff_id in handoffs:
            items.append(handoff_item(handoffs[record.handoff_id]))
    return items


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


def render_message(
    kind: str, records: list[AlertRecord], items: list[AlertItem]
) -> tuple[str, str]:
    first = records[0]
    subject = "[handoff] " + SUBJECTS[kind].format(
        n=len(records),
        workflow=first.workflow or "unknown workflow",
        failure=first.failure_class or "no class",
    )
    lines = [subject.removeprefix("[handoff] "), ""]
    shown = items[: settings.ALERT_MAX_ITEMS_PER_MESSAGE]
    for item in shown:
        lines += [
            f"Instance:              {item.instance}",
            f"Workflow:              {item.workflow}",
            f"Failure class:         {item.failure_class}",
            f"Affected record:       {item.affected_record}",
            f"Last successful step:  {item.last_successful_step}",
            f"Safest next action:    {item.next_action}",
            f"Open:                  {item.link}",
        ]
        if item.detail:
            lines.append(f"Detail:                {item.detail}")
        lines.append("")
    if len(items) > len(shown):
        lines.append(f"... and {len(items) - len(shown)} more: {_more_link(kind, first)}")
        lines.append("")
    lines.append(
        "This alert is sent once per failure episode; a handoff that stays broken is not alerted again."
    )
    return subject, "\n".join(lines)


def _more_link(kind: str, record: AlertRecord) -> str:
    if kind == AlertKind.RECONCILIATION:
        return _absolute(reverse("reconciliation:health"))
    query = "?state=needs_attention"
    if record.failure_class:
        query += f"&failure_class={record.failure_class}"
    return _absolute(reverse("outbox:list") + query)


def _webhook(severity: str) -> tuple[str, str]:
    if severity == AlertSeverity.PAGE:
        return settings.ALERT_PAGE_WEBHOOK_URL, settings.ALERT_PAGE_WEBHOOK_SECRET
    return settings.ALERT_WEBHOOK_URL, settings.ALERT_WEBHOOK_SECRET


def _post_webhook(severity: str, payload: dict, client: httpx.Client) -> str:
    url, secret = _webhook(severity)
    body = json.dumps(payload, sort_keys=True, default=str)
    headers = {**signed_headers(body, secret=secret), "Content-Type": "application/json"}
    response = client.post(url, content=body.encode(), headers=headers)
    return f"HTTP {response.status_code}"


def _compose(kind: str, records: list[AlertRecord], message_id: str) -> tuple[str, str, dict]:
    """Subject, body and webhook payload of one message."""
    first = records[0]
    base = {
        "type": f"handoff.alert.{kind}",
        "id": message_id,
        "severity": first.severity,
        "workspace_id": first.workspace_id,
    }
    if first.severity == AlertSeverity.PAGE:
        subject, body, fields = render_page(first, now=timezone.now())
        return subject, body, {**base, "subject": subject, **fields}
    items = _items_for(records)
    subject, body = render_message(kind, records, items)
    return subject, body, {**base, "subject": subject, "items": [asdict(i) for i in items]}


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


def _send_email(kind: str, subject: str, body: str, recipients: list[str]) -> str:
    """ "" when sent, else the error."""
    try:
        EmailMessage(
            subject=subject,
            body=body,
            from_email=settings.ALERT_FROM_EMAIL,
            to=recipients,
            headers={"X-Handoff-Alert": kind},
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
    subject, body, payload = message
    email_error = _send_email(kind, subject, body, recipients) if recipients else ""
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
    message_id = uuid.uuid4().hex
    recipients = _recipients(records)
    emailed, webhook_status, errors = _deliver(
        kind, records[0].severity, _compose(kind, records, message_id), recipients, http_client
    )
    webhooked = webhook_status.startswith("HTTP 2")
    AlertRecord.objects.using(DB).filter(pk__in=[r.pk for r in records]).update(
        sent_at=timezone.now() if emailed or webhooked else None,
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
    now = now or timezone.now()
    result = SweepResult(recorded=record_episodes(now=now, limit=limit))
    unsent = list(
        AlertRecord.objects.using(DB)
        .filter(sent_at__isnull=True, send_attempts__lt=MAX_SEND_ATTEMPTS)
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
    return result
