"""How each kind of channel is told about an incident: the request (or e-mail) for one notification.

- webhook: a JSON body signed in the Standard Webhooks format; `webhook-id` is the notification's message
  id, so a resend is recognisably the same notification;
- slack: a Slack-compatible incoming-webhook payload (`text` and `blocks`);
- pagerduty: an Events API v2 event (`trigger`, `acknowledge`, `resolve`) with the incident's `dedup_key`;
  the routing key comes from the environment variable the channel names;
- email: a message whose Message-ID is derived from the message id.
A channel's secret is read from the environment at send time, never stored or shown.
"""

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMessage
from django.utils import timezone

from outbox.signing import signed_headers
from reconciliation.alerts.incident_text import IncidentSummary
from reconciliation.models import AlertChannel, ChannelKind, Notification, NotificationEvent

HEADLINES = {
    NotificationEvent.ACKNOWLEDGE: "ACKNOWLEDGED",
    NotificationEvent.RESOLVE: "RESOLVED",
}


class ChannelMisconfigured(Exception):
    """The channel names a secret that is not set: nothing can be sent until it is."""


@dataclass(frozen=True)
class Outgoing:
    """One HTTP request for one notification."""

    url: str
    body: str
    headers: dict[str, str]


def subject(notification: Notification, summary: IncidentSummary) -> str:
    """A page says PAGE, a queue incident QUEUE, each with its owner and its SLA (or acknowledgement
    deadline); an acknowledgement or a resolve says so."""
    if notification.event == NotificationEvent.TRIGGER:
        return f"[handoff] {summary.headline}"
    return f"[handoff] {HEADLINES[notification.event]}: incident {summary.incident_id}: {summary.title}"


def _secret(channel: AlertChannel) -> str:
    value = os.environ.get(channel.secret_env, "") if channel.secret_env else ""
    if not value:
        raise ChannelMisconfigured(
            f"channel {channel.name}: environment variable {channel.secret_env or '(none named)'} is not set"
        )
    return value


def _document(notification: Notification, summary: IncidentSummary) -> dict:
    return {
        "type": f"handoff.incident.{notification.event}",
        "id": notification.message_id,
        "number": notification.number,
        "dedup_key": f"handoff-incident-{summary.incident_id}",
        "subject": subject(notification, summary),
        "incident": asdict(summary),
    }


def _webhook(notification: Notification, summary: IncidentSummary, now: datetime) -> Outgoing:
    body = json.dumps(_document(notification, summary), sort_keys=True)
    headers = signed_headers(
        body, secret=_secret(notification.channel), message_id=notification.message_id, now=now
    )
    return Outgoing(
        notification.channel.target, body, {"Content-Type": "application/json", **headers}
    )


def _slack(notification: Notification, summary: IncidentSummary, now: datetime) -> Outgoing:
    text = subject(notification, summary).removeprefix("[handoff] ")
    details = "\n".join(summary.lines()[2:])
    body = {
        "text": f"{text} ({notification.message_id})",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": text[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"```{details}```"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": notification.message_id}]},
        ],
    }
    return Outgoing(
        notification.channel.target,
        json.dumps(body),
        {"Content-Type": "application/json", "X-Handoff-Notification-Id": notification.message_id},
    )


def _pagerduty(notification: Notification, summary: IncidentSummary, now: datetime) -> Outgoing:
    event = {
        "routing_key": _secret(notification.channel),
        "event_action": notification.event,
        "dedup_key": f"handoff-incident-{summary.incident_id}",
    }
    if notification.event == NotificationEvent.TRIGGER:
        event["payload"] = {
            "summary": subject(notification, summary)[:1024],
            "source": settings.CONSOLE_BASE_URL,
            "severity": "critical" if summary.severity == "page" else "warning",
            "timestamp": now.isoformat(),
            "custom_details": {**asdict(summary), "notification_id": notification.message_id},
        }
        event["links"] = [{"href": summary.link, "text": f"incident {summary.incident_id}"}]
    return Outgoing(
        notification.channel.target,
        json.dumps(event),
        {"Content-Type": "application/json", "X-Handoff-Notification-Id": notification.message_id},
    )


BUILDERS = {
    ChannelKind.WEBHOOK: _webhook,
    ChannelKind.SLACK: _slack,
    ChannelKind.PAGERDUTY: _pagerduty,
}


def request_for(notification: Notification, summary: IncidentSummary) -> Outgoing:
    """The HTTP request of a webhook, Slack or PagerDuty notification. Raises ChannelMisconfigured."""
    return BUILDERS[notification.channel.kind](notification, summary, timezone.now())


def email_for(notification: Notification, summary: IncidentSummary) -> EmailMessage:
    lines = [*summary.lines(), "", f"Notification {notification.message_id}"]
    return EmailMessage(
        subject=subject(notification, summary),
        body="\n".join(lines),
        from_email=settings.ALERT_FROM_EMAIL,
        to=[notification.channel.target],
        headers={
            "Message-ID": f"<{notification.message_id}@handoff-console>",
            "X-Handoff-Notification-Id": notification.message_id,
        },
    )
