"""Incidents' records: incidents, their members, timeline, channels, escalation policies and notifications
(`incidents`), replays of an incident's handoffs previewed item by item (`replays`).

The tables keep the names they had when incidents lived in reconciliation (`db_table`): the move
(migration 0001) changed Django's state only, no table was rebuilt."""

from incidents.models.incidents import (
    CONDITION_KINDS,
    HANDOFF_TO_NOTIFICATION,
    SECURITY_INCIDENTS_PERMISSION,
    AlertChannel,
    ChannelKind,
    EscalationPolicy,
    Incident,
    IncidentEvent,
    IncidentKind,
    IncidentMember,
    IncidentQuerySet,
    IncidentSeverity,
    IncidentState,
    Notification,
    NotificationEvent,
    NotificationState,
)
from incidents.models.replays import (
    ACTED_ON,
    REPLAY_TRANSITIONS,
    Replay,
    ReplayItem,
    ReplayOutcome,
    ReplayState,
    ReplayVerdict,
)

__all__ = [
    "ACTED_ON",
    "CONDITION_KINDS",
    "HANDOFF_TO_NOTIFICATION",
    "REPLAY_TRANSITIONS",
    "AlertChannel",
    "ChannelKind",
    "EscalationPolicy",
    "Incident",
    "IncidentEvent",
    "IncidentKind",
    "IncidentMember",
    "IncidentQuerySet",
    "IncidentSeverity",
    "IncidentState",
    "SECURITY_INCIDENTS_PERMISSION",
    "Notification",
    "NotificationEvent",
    "NotificationState",
    "Replay",
    "ReplayItem",
    "ReplayOutcome",
    "ReplayState",
    "ReplayVerdict",
]
