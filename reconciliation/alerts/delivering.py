"""Sending queued notifications, like handoffs: claim, send outside any transaction, record the outcome.

A page (or a queue notice) is sent only if its incident is open and its cause still holds at that moment,
read from the database (`incident_cause_holds`); otherwise it is withdrawn, on the incident's timeline,
and nothing is sent: nobody is paged for a cause that has already ended.

A notification is claimed by a conditional update that moves its next attempt into the future (a lease:
a sweep that dies mid-send leaves it due again, and it is resent under the same message id); a failed send
is retried on the product's one backoff schedule (`outbox.retry.backoff_ceiling`, as handoffs), up to
ALERT_NOTIFICATION_MAX_ATTEMPTS, then it is `failed`:
on the incident's timeline, on Health and in /metrics, never silent. Due times are on the database clock.
"""

from dataclasses import dataclass

import httpx
from django.conf import settings
from django.db.models import F

from lib.databases import DB
from outbox.clock import DbNow
from outbox.redaction import redact_text
from outbox.retry import backoff_ceiling
from reconciliation.alerts.channels import ChannelMisconfigured, email_for, request_for
from reconciliation.alerts.incident_text import incident_summary
from reconciliation.alerts.incidents import incident_cause_holds
from reconciliation.models import (
    ChannelKind,
    IncidentEvent,
    Notification,
    NotificationEvent,
    NotificationState,
)


@dataclass
class SendResult:
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    withdrawn: int = 0


def _backoff(attempts: int) -> float:
    return backoff_ceiling(
        attempts,
        base=settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS,
        cap=settings.ALERT_NOTIFICATION_RETRY_CAP_SECONDS,
    )


def _claim(notification: Notification) -> bool:
    lease = settings.ALERT_NOTIFICATION_TIMEOUT_SECONDS * 2 + _backoff(notification.attempts + 1)
    return bool(
        Notification.objects.using(DB)
        .filter(
            pk=notification.pk,
            state=NotificationState.PENDING,
            attempts=notification.attempts,
        )
        .update(attempts=F("attempts") + 1, next_attempt_at=DbNow(lease))
    )


def _send(notification: Notification, client: httpx.Client) -> tuple[str, str]:
    """(status, error): error is "" when the channel took the notification."""
    channel = notification.channel
    summary = incident_summary(notification.incident, workspace_id=channel.workspace_id)
    try:
        if channel.kind == ChannelKind.EMAIL:
            email_for(notification, summary).send(fail_silently=False)
            return "sent", ""
        outgoing = request_for(notification, summary)
        response = client.post(
            outgoing.url, content=outgoing.body.encode(), headers=outgoing.headers
        )
    except ChannelMisconfigured as exc:
        return "misconfigured", str(exc)
    except httpx.HTTPError as exc:
        return "failed", f"{type(exc).__name__}: {redact_text(str(exc))}"
    except Exception as exc:  # noqa: BLE001 - any mail failure is recorded and retried
        return "failed", f"{type(exc).__name__}: {redact_text(str(exc))}"
    status = f"HTTP {response.status_code}"
    return status, "" if response.is_success else f"answered {status}"


def _withdraw(notification: Notification, result: SendResult) -> None:
    Notification.objects.using(DB).filter(pk=notification.pk).update(
        state=NotificationState.WITHDRAWN, last_error="the cause had ended: not sent"
    )
    IncidentEvent.objects.using(DB).create(
        incident_id=notification.incident_id,
        action="page_withdrawn",
        actor_label="notification sender",
        note=f"{notification.message_id} to {notification.channel.name}: the cause had ended "
        "before it went out, nothing was sent",
    )
    result.withdrawn += 1


def _still_due(notification: Notification) -> bool:
    """A page or queue notice goes out only while its cause holds; acknowledgements and resolves always."""
    if notification.event != NotificationEvent.TRIGGER:
        return True
    return incident_cause_holds(notification.incident_id)


def _record(notification: Notification, status: str, error: str, result: SendResult) -> None:
    rows = Notification.objects.using(DB).filter(pk=notification.pk)
    if not error:
        rows.update(
            state=NotificationState.SENT, sent_at=DbNow(), last_status=status, last_error=""
        )
        result.sent += 1
        return
    attempts = notification.attempts + 1
    if attempts < settings.ALERT_NOTIFICATION_MAX_ATTEMPTS:
        rows.update(
            last_status=status, last_error=error[:2000], next_attempt_at=DbNow(_backoff(attempts))
        )
        result.retrying += 1
        return
    rows.update(state=NotificationState.FAILED, last_status=status, last_error=error[:2000])
    IncidentEvent.objects.using(DB).create(
        incident_id=notification.incident_id,
        action="notification_failed",
        actor_label="notification sender",
        note=f"{notification.message_id} to {notification.channel.name}: {error}"[:2000],
    )
    result.failed += 1


def notifications_send_due(
    *, limit: int = 200, http_client: httpx.Client | None = None
) -> SendResult:
    """Send every due notification once. Call outside transactions: sending is not rollback-safe."""
    result = SendResult()
    due = list(
        Notification.objects.using(DB)
        .filter(state=NotificationState.PENDING, next_attempt_at__lte=DbNow())
        .select_related("channel", "incident")
        .order_by("next_attempt_at", "pk")[:limit]
    )
    client = http_client or httpx.Client(timeout=settings.ALERT_NOTIFICATION_TIMEOUT_SECONDS)
    try:
        for notification in due:
            if not _claim(notification):
                continue
            if not _still_due(notification):
                _withdraw(notification, result)
                continue
            status, error = _send(notification, client)
            _record(notification, status, error, result)
    finally:
        if http_client is None:
            client.close()
    return result
