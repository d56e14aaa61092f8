"""The alert sweep (`manage.py send_alerts`, the django-q2 schedule `send-alerts`): incidents are the one way
a person is told. It keeps the channels seeded from settings in step, brings incidents in step with their
causes, escalates unacknowledged pages, sends the notifications that are due and continues replays whose
background job stalled."""

from dataclasses import dataclass, field

import httpx

from reconciliation.alerts.delivering import notifications_send_due
from reconciliation.alerts.incidents import incidents_sync
from reconciliation.alerts.notifications import incidents_escalate, settings_channels_seed
from reconciliation.alerts.replay_run import replays_resume


@dataclass
class SweepResult:
    incidents: dict[str, int] = field(default_factory=dict)


def alerts_send_due(*, http_client: httpx.Client | None = None) -> SweepResult:
    """One pass of the sweep; call outside transactions (sending is not rollback-safe)."""
    settings_channels_seed()
    synced = incidents_sync()
    escalated = incidents_escalate()
    sent = notifications_send_due(http_client=http_client)
    return SweepResult(
        incidents={
            "opened": synced.opened,
            "paged": synced.paged,
            "resolved": synced.resolved,
            "escalated": escalated,
            "notifications_sent": sent.sent,
            "notifications_failed": sent.failed,
            "notifications_withdrawn": sent.withdrawn,
            "replays_resumed": replays_resume(),
        }
    )
