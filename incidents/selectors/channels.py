"""The alert channels' delivery, for Health: per channel, its notifications waiting to be sent, whose outcome
is unknown and that could not be sent, and whether its destination takes calls. The product's own
notifications are handoffs to the channel's destination (`alert-channel-<id>`), counted apart from the
workspaces' handoffs. A failing channel (a notification not sent, or its destination paused) is never an
incident of its own (`incidents/causes.py` leaves its notifications out), so this line is where a person
sees it, with the path its incidents take meanwhile (docs/incidents.md, "A channel that fails")."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q

from incidents.channels.delivery import channel_destination_name
from incidents.models import AlertChannel
from lib.databases import DB
from outbox.models import DISPATCHER_STATES, DestinationHealth, Handoff
from outbox.models import HandoffState as S
from outbox.models.handoffs import CHANNEL_DESTINATION_PREFIX
from outbox.redaction import redact_text

CHANNELS_SHOWN = 20


@dataclass(frozen=True)
class ChannelDelivery:
    """One channel destination's notifications of the viewer's workspaces: waiting (pending, in flight),
    outcome unknown, could not be sent; `paused` and `last_error` from its destination's breaker. `channel`
    is None for a destination whose channel is gone or belongs to no workspace in view."""

    destination: str
    channel: AlertChannel | None
    waiting: int
    uncertain: int
    failed: int
    paused: bool
    last_error: str

    @property
    def name(self) -> str:
        if self.channel is None:
            return self.destination
        return f"{self.channel.name} ({self.channel.get_kind_display()})"

    @property
    def failing(self) -> bool:
        return self.paused or self.failed > 0


@dataclass(frozen=True)
class AlertChannels:
    """Health's line of the alert channels: the rows, and whether any is failing (then the page says the
    path its incidents take meanwhile)."""

    rows: list[ChannelDelivery]

    @property
    def failing(self) -> bool:
        return any(row.failing for row in self.rows)


def _counted(workspace_ids: Iterable[int], *, security: bool):
    """The open notifications a channel's row counts, of these workspaces; with `security` (the viewer holds
    `incidents.view_security_incident`) those of security incidents too (workspace 0, no workspace's)."""
    ids = [*workspace_ids, 0] if security else list(workspace_ids)
    return Handoff.objects.using(DB).notifications().open().filter(workspace_id__in=ids)


def channel_notifications(
    workspace_ids: Iterable[int], *, destination: str, security: bool = False, limit: int = 100
) -> list[Handoff]:
    """What one channel's row on Health counts, listed (newest first, the latest `limit`): the same rows as
    `alert_channel_delivery` counts for the same workspaces and `security`, and only those."""
    rows = _counted(workspace_ids, security=security).filter(destination=destination)
    return list(rows.order_by("-created_at", "-id")[:limit])


def _counts(workspace_ids: Iterable[int], *, security: bool) -> dict[str, dict]:
    rows = (
        _counted(workspace_ids, security=security)
        .order_by()
        .values("destination")
        .annotate(
            waiting=Count("id", filter=Q(state__in=DISPATCHER_STATES)),
            uncertain=Count("id", filter=Q(state=S.UNCERTAIN)),
            failed=Count("id", filter=Q(state=S.NEEDS_ATTENTION)),
        )
    )
    return {row.pop("destination"): row for row in rows}


def alert_channel_delivery(
    workspace_ids: Iterable[int], *, security: bool = False
) -> AlertChannels:
    """Health's one line of the alert channels: each channel of these workspaces (or of every workspace)
    with a notification of theirs open or its destination paused, and each channel destination with one
    open whose channel is not in view; by destination name. `security`: the viewer holds
    `incidents.view_security_incident` (`sees_security_incidents`), so the notifications of security
    incidents (workspace 0, which no workspace's scope holds) are counted too. Three queries: the channels,
    the open notifications (`handoff_open_notifications_idx`), the paused destinations."""
    workspace_ids = list(workspace_ids)
    channels = {
        channel_destination_name(channel): channel
        for channel in AlertChannel.objects.using(DB).filter(
            Q(workspace_id__in=workspace_ids) | Q(workspace_id__isnull=True)
        )
    }
    counts = _counts(workspace_ids, security=security)
    names = sorted(set(channels) | {n for n in counts if n.startswith(CHANNEL_DESTINATION_PREFIX)})
    # No name, no query (nor its four subqueries built): most workspaces have no channel in trouble.
    paused = (
        {
            health.name: health
            for health in DestinationHealth.objects.using(DB)
            .paused_by_breaker()
            .filter(name__in=names)
        }
        if names
        else {}
    )
    rows = [
        _delivery(name, channels.get(name), paused.get(name), counts.get(name))
        for name in names
        if name in paused or counts.get(name)
    ]
    return AlertChannels(rows[:CHANNELS_SHOWN])


def _delivery(name: str, channel, health, open_rows: dict | None) -> ChannelDelivery:
    """One channel's line: its open notifications by state, and its destination's pause (None: taking calls)."""
    return ChannelDelivery(
        destination=name,
        channel=channel,
        **(open_rows or {"waiting": 0, "uncertain": 0, "failed": 0}),
        paused=health is not None,
        last_error=redact_text(health.last_error)[:200] if health is not None else "",
    )
