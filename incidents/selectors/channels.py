"""Alert channels that are failing, for Health: a channel whose notifications could not be sent, or whose
destination is paused. A failing channel is never an incident of its own (`incidents/causes.py` leaves its
notifications out), so this line is where a person sees it (docs/incidents.md, "A channel that fails")."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q

from incidents.channels.delivery import channel_destination_name
from incidents.models import AlertChannel, Notification
from lib.databases import DB
from outbox.models import DestinationHealth, DestinationState
from outbox.redaction import redact_text

CHANNELS_SHOWN = 20


@dataclass(frozen=True)
class FailingChannel:
    channel: AlertChannel
    failed: int
    paused: bool
    last_error: str


def channels_failing(workspace_ids: Iterable[int]) -> list[FailingChannel]:
    """The channels of these workspaces (and those of every workspace) with a notification that could not be
    sent or a paused destination. Three queries."""
    channels = {
        channel.pk: channel
        for channel in AlertChannel.objects.using(DB).filter(
            Q(workspace_id__in=list(workspace_ids)) | Q(workspace_id__isnull=True)
        )
    }
    failed = dict(
        Notification.objects.using(DB)
        .failed()
        .filter(channel_id__in=list(channels))
        .order_by()
        .values_list("channel_id")
        .annotate(n=Count("id"))
    )
    by_destination = {channel_destination_name(c): c for c in channels.values()}
    paused = {
        health.name: health
        for health in DestinationHealth.objects.using(DB).filter(
            name__in=list(by_destination), state=DestinationState.PAUSED
        )
    }
    rows = []
    for name, channel in sorted(by_destination.items()):
        health = paused.get(name)
        if health is None and not failed.get(channel.pk):
            continue
        error = redact_text(health.last_error)[:200] if health is not None else ""
        rows.append(FailingChannel(channel, failed.get(channel.pk, 0), health is not None, error))
    return rows[:CHANNELS_SHOWN]
