"""What each kind of channel is sent about an incident: the payload of one notification's handoff.

Rendered when the notification is queued and frozen in its handoff (the outbox's engine sends it,
`incidents/channels/delivery.py`), so that every resend is the same message:
- webhook: a JSON document, signed in the Standard Webhooks format by the webhook kind; its `id` (the
  notification's id) is the `webhook-id`, so a resend is recognisably the same notification;
- slack: a Slack-compatible incoming-webhook payload (`text` and `blocks`);
- pagerduty: an Events API v2 event (`trigger`, `acknowledge`, `resolve`) with the incident's `dedup_key`,
  without its routing key (the pagerduty_events kind reads it from the variable the channel names);
- email: the recipient, subject and text; the smtp kind derives the Message-ID from the handoff's key.
A channel's secret is read from the environment at send time, never stored or shown.
"""

import json
from dataclasses import asdict
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from incidents.models import ChannelKind, Notification, NotificationEvent
from incidents.text import IncidentSummary

HEADLINES = {
    NotificationEvent.ACKNOWLEDGE: "ACKNOWLEDGED",
    NotificationEvent.RESOLVE: "RESOLVED",
}


def subject(notification: Notification, summary: IncidentSummary) -> str:
    """A page says PAGE, a queue incident QUEUE, each with its owner and its SLA (or acknowledgement
    deadline); an acknowledgement or a resolve says so."""
    if notification.event == NotificationEvent.TRIGGER:
        return f"[handoff] {summary.headline}"
    return f"[handoff] {HEADLINES[notification.event]}: incident {summary.incident_id}: {summary.title}"


def _webhook(notification: Notification, summary: IncidentSummary, now: datetime) -> dict:
    # Through JSON and back: what is frozen in the handoff is what is sent, whatever the summary held.
    return json.loads(
        json.dumps(
            {
                "type": f"handoff.incident.{notification.event}",
                "id": notification.message_id,
                "number": notification.number,
                "dedup_key": f"handoff-incident-{summary.incident_id}",
                "subject": subject(notification, summary),
                "incident": asdict(summary),
            },
            default=str,
        )
    )


def _slack(notification: Notification, summary: IncidentSummary, now: datetime) -> dict:
    text = subject(notification, summary).removeprefix("[handoff] ")
    details = "\n".join(summary.lines()[2:])
    return {
        "text": f"{text} ({notification.message_id})",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": text[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"```{details}```"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": notification.message_id}]},
        ],
    }


def _pagerduty(notification: Notification, summary: IncidentSummary, now: datetime) -> dict:
    event = {
        "event_action": notification.event,
        "dedup_key": f"handoff-incident-{summary.incident_id}",
    }
    if notification.event == NotificationEvent.TRIGGER:
        details = json.loads(json.dumps(asdict(summary), default=str))
        event["payload"] = {
            "summary": subject(notification, summary)[:1024],
            "source": settings.CONSOLE_BASE_URL,
            "severity": "critical" if summary.severity == "page" else "warning",
            "timestamp": now.isoformat(),
            "custom_details": {**details, "notification_id": notification.message_id},
        }
        event["links"] = [{"href": summary.link, "text": f"incident {summary.incident_id}"}]
    return event


def _email(notification: Notification, summary: IncidentSummary, now: datetime) -> dict:
    lines = [*summary.lines(), "", f"Notification {notification.message_id}"]
    return {
        "to": notification.channel.target,
        "subject": subject(notification, summary),
        "body": "\n".join(lines),
    }


BUILDERS = {
    ChannelKind.WEBHOOK: _webhook,
    ChannelKind.SLACK: _slack,
    ChannelKind.PAGERDUTY: _pagerduty,
    ChannelKind.EMAIL: _email,
}


def payload_for(notification: Notification, summary: IncidentSummary) -> dict:
    """What the notification's handoff sends to its channel."""
    return BUILDERS[notification.channel.kind](notification, summary, timezone.now())
