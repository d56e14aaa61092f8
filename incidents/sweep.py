"""The alert sweep (the django-q2 schedule `send-alerts`, and `manage.py send_alerts`): incidents are the one
way a person is told. It keeps the channels seeded from settings in step, brings incidents in step with their
causes, gives an incident whose owner left a new one, escalates unacknowledged pages (each notification
queued as a handoff to its channel's destination) and continues replays whose background job stalled.
Sending is the dispatchers' (`incidents/channels/delivery.py`)."""

from dataclasses import dataclass, field

from incidents.services.incidents import incidents_sync
from incidents.services.notifications import (
    incidents_escalate,
    incidents_owners_refresh,
    notifications_failed_note,
    settings_channels_seed,
)
from incidents.services.replay_run import replays_resume


@dataclass
class SweepResult:
    incidents: dict[str, int] = field(default_factory=dict)


def alerts_send_due() -> SweepResult:
    """One pass of the sweep: writes rows only (the notifications' handoffs are the dispatchers' to send)."""
    settings_channels_seed()
    synced = incidents_sync()
    owners_changed = incidents_owners_refresh()
    escalated = incidents_escalate()
    return SweepResult(
        incidents={
            "opened": synced.opened,
            "paged": synced.paged,
            "resolved": synced.resolved,
            "owners_changed": owners_changed,
            "escalated": escalated,
            "notifications_failed": notifications_failed_note(),
            "replays_resumed": replays_resume(),
        }
    )
