"""Notifications about incidents, queued as rows, each delivered as a handoff: a stable id, the outbox's
retries, a visible failure.

`incident_page` sends page n of an incident (the first page, or an escalation) to the channels of its
level; `incident_notify` tells the channels that were paged that it was acknowledged or resolved (PagerDuty's
acknowledge and resolve with the same dedup_key). Both only write rows: each notification and its handoff
to the channel's destination (`incidents/channels/delivery.py`), which the dispatchers deliver like any
handoff.

An incident is of one workspace: its channels are that workspace's and the every-workspace ones, never
another workspace's. A workspace with no operator has its incidents owned by the fallback on-call
(`approvals.on_call`), who is paged by e-mail through a channel seeded for it (`FALLBACK_CHANNEL`).

The message id of a notification is `incident-<id>-<number>`, numbered per incident: every resend of it
carries the same id (the Standard Webhooks `webhook-id`, the e-mail's Message-ID, the payload's `id`), so a
receiver that sees it twice knows it is the same notification.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Q

from approvals.on_call import active_operators, failure_owner_id, workspace_operator_id
from incidents.causes import held_by_its_owner
from incidents.channels.delivery import notification_handoff_record
from incidents.models import (
    AlertChannel,
    ChannelKind,
    EscalationPolicy,
    Incident,
    IncidentEvent,
    IncidentKind,
    IncidentMember,
    IncidentSeverity,
    IncidentState,
    Notification,
    NotificationEvent,
    NotificationState,
)
from lib.databases import DB
from outbox.clock import DbNow
from outbox.models import OPEN_STATES, Handoff


def message_id(incident_id: int, number: int) -> str:
    return f"incident-{incident_id}-{number}"


# The channel seeded for the fallback on-call of a workspace with no operator: their e-mail address.
FALLBACK_CHANNEL = "fallback on-call"


def fallback_channel(incident: Incident) -> AlertChannel | None:
    """The e-mail channel of the incident's owner when they own it as the fallback on-call (its workspace
    has no operator), seeded from their address; None otherwise, and for an owner who was deactivated:
    nobody who left is paged. Inside the caller's transaction."""
    if incident.workspace_id is None or incident.owner_id is None:
        return None
    if workspace_operator_id(incident.workspace_id) is not None:
        return None
    email = (
        get_user_model()
        .objects.using(DB)
        .filter(pk=incident.owner_id, is_active=True)
        .values_list("email", flat=True)
        .first()
    )
    if not email:
        return None
    channel, _ = AlertChannel.objects.using(DB).update_or_create(
        workspace_id=incident.workspace_id,
        name=FALLBACK_CHANNEL,
        defaults={
            "kind": ChannelKind.EMAIL,
            "target": email,
            "severity": IncidentSeverity.QUEUE,
            "level": 0,
            "enabled": True,
        },
    )
    return channel


# Channels seeded from settings for every workspace (docs/incidents.md): ALERT_EMAILS, ALERT_WEBHOOK_URL,
# ALERT_PAGE_WEBHOOK_URL. Named by the setting, so that the sweep can keep them in step with it.
SETTINGS_CHANNEL_PREFIXES = ("ALERT_EMAILS ", "ALERT_WEBHOOK_URL", "ALERT_PAGE_WEBHOOK_URL")


def _settings_channels() -> list[dict]:
    wanted = [
        {
            "name": f"ALERT_EMAILS {address}"[:60],
            "kind": ChannelKind.EMAIL,
            "target": address,
            "severity": IncidentSeverity.QUEUE,
        }
        for address in settings.ALERT_EMAILS
    ]
    for name, secret_env, severity in (
        ("ALERT_WEBHOOK_URL", "ALERT_WEBHOOK_SECRET", IncidentSeverity.QUEUE),
        ("ALERT_PAGE_WEBHOOK_URL", "ALERT_PAGE_WEBHOOK_SECRET", IncidentSeverity.PAGE),
    ):
        if getattr(settings, name):
            wanted.append(
                {
                    "name": name,
                    "kind": ChannelKind.WEBHOOK,
                    "target": getattr(settings, name),
                    "secret_env": secret_env,
                    "severity": severity,
                }
            )
    return wanted


def settings_channels_seed() -> int:
    """Every-workspace channels in step with the settings that seed them: one per address of ALERT_EMAILS
    (every incident), the signed webhooks; a seeded channel whose setting is gone is disabled."""
    wanted = _settings_channels()
    rows = AlertChannel.objects.using(DB).filter(workspace_id__isnull=True)
    for fields in wanted:
        name = fields.pop("name")
        row = rows.filter(name=name).first()
        if row is None:
            AlertChannel.objects.using(DB).create(name=name, level=0, enabled=True, **fields)
        elif any(getattr(row, k) != v for k, v in fields.items()) or not row.enabled:
            rows.filter(pk=row.pk).update(enabled=True, **fields)
        fields["name"] = name
    seeded = Q()
    for prefix in SETTINGS_CHANNEL_PREFIXES:
        seeded |= Q(name__startswith=prefix)
    return (
        rows.filter(seeded, enabled=True)
        .exclude(name__in=[f["name"] for f in wanted])
        .update(enabled=False)
    )


def channels_for(incident: Incident, workspaces: list[int]):
    """Enabled channels of the incident's workspaces (and the every-workspace ones) for its severity."""
    severities = (
        [IncidentSeverity.PAGE, IncidentSeverity.QUEUE]
        if incident.severity == IncidentSeverity.PAGE
        else [IncidentSeverity.QUEUE]
    )
    return AlertChannel.objects.using(DB).filter(
        Q(workspace_id__isnull=True) | Q(workspace_id__in=workspaces),
        ~Q(name=FALLBACK_CHANNEL),
        enabled=True,
        severity__in=severities,
    )


def channels_at_level(incident: Incident, workspaces: list[int], level: int) -> list[AlertChannel]:
    """The channels of an escalation level; past the last level, the last level again (bounded repeats).
    The fallback on-call who owns the incident is told at every level."""
    # By id: the page's event names them, its notifications are numbered, and of two channels to one address
    # the older sends, in this order (without it, the heap's: an update changes it).
    channels = list(channels_for(incident, workspaces).order_by("pk"))
    levels = sorted({c.level for c in channels})
    chosen = max((lv for lv in levels if lv <= level), default=levels[0]) if levels else None
    fallback = fallback_channel(incident)
    chosen_channels = [c for c in channels if c.level == chosen] + ([fallback] if fallback else [])
    # One message per address: a seeded ALERT_EMAILS channel and a workspace's channel to the same address
    # (or the fallback's) tell that person once.
    unique: dict[tuple[str, str], AlertChannel] = {}
    for channel in chosen_channels:
        unique.setdefault((channel.kind, channel.target.lower()), channel)
    return list(unique.values())


def _queue(incident: Incident, channels: list[AlertChannel], event: str) -> int:
    """Rows for one notification (one number) to these channels. Inside the caller's transaction."""
    latest = Notification.objects.using(DB).filter(incident=incident).aggregate(n=Max("number"))
    number = (latest["n"] or 0) + 1
    for channel in channels:
        notification = Notification.objects.using(DB).create(
            incident=incident,
            channel=channel,
            number=number,
            event=event,
            message_id=message_id(incident.pk, number),
        )
        # Delivered by the outbox's engine: a handoff to the channel's destination, same transaction.
        notification_handoff_record(notification)
    return number


def _event(incident: Incident, action: str, note: str) -> None:
    IncidentEvent.objects.using(DB).create(
        incident=incident, action=action, actor_label="incident sweep", note=note
    )


def _why_owner_cannot_act(incident: Incident, owner) -> str:
    """Why the incident's owner can no longer act on it ("" : they can): deactivated, or no operator of
    its workspace any more while the rule would give it to someone else (a fallback keeps what they own
    while the workspace has no operator and they are still its fallback)."""
    if not owner.is_active:
        return f"{owner.username} can no longer act (deactivated)"
    if incident.workspace_id is None:
        return ""
    if active_operators(incident.workspace_id).filter(user_id=owner.pk).exists():
        return ""
    if failure_owner_id(incident.workspace_id, workflow=incident.workflow) == owner.pk:
        return ""
    return f"{owner.username} can no longer act (no operator of workspace {incident.workspace_id})"


def incident_owner_refresh(incident: Incident) -> bool:
    """Give the incident a new owner when its owner left (`_why_owner_cannot_act`): the one a new failure
    of it gets (`failure_owner_id`: the active on-call, else the first active operator, else the
    fallback), or nobody when none can; the change is an `owner_changed` event with the reason. Inside
    the caller's transaction, on the locked row; True when it changed."""
    if incident.owner_id is None:
        return False
    owner = get_user_model().objects.using(DB).filter(pk=incident.owner_id).first()
    why = _why_owner_cannot_act(incident, owner) if owner is not None else ""
    if not why:
        return False
    _owner_replace(incident, why)
    return True


def _owner_replace(incident: Incident, why: str) -> None:
    new_id = failure_owner_id(incident.workspace_id, workflow=incident.workflow)
    Incident.objects.using(DB).filter(pk=incident.pk).update(owner_id=new_id)
    incident.owner_id = new_id
    new = get_user_model().objects.using(DB).filter(pk=new_id).first() if new_id else None
    _event(incident, "owner_changed", f"{why}: owner {new.username if new else 'nobody'}")


def incidents_owned_live(owner_id: int) -> list[int]:
    """The live incidents `owner_id` owns, by id."""
    live = Incident.objects.using(DB).exclude(state=IncidentState.RESOLVED)
    return list(live.filter(owner_id=owner_id).values_list("pk", flat=True))


def incidents_owner_deleted(*, incident_ids: list[int], username: str) -> int:
    """The incidents whose owner's account was just deleted (the deletion set their owner to null, which
    no sweep would ever look at again): each gets the owner a new failure gets, with an `owner_changed`
    event naming who left. Inside the deletion's transaction; the number changed."""
    changed = 0
    for pk in incident_ids:
        with transaction.atomic(using=DB):
            locked = (
                Incident.objects.using(DB)
                .select_for_update(no_key=True)
                .exclude(state=IncidentState.RESOLVED)
                .filter(pk=pk, owner_id__isnull=True)
                .first()
            )
            if locked is not None:
                _owner_replace(locked, f"{username} can no longer act (account deleted)")
                changed += 1
    return changed


def incidents_owners_refresh(*, owner_id: int | None = None) -> int:
    """Each live incident whose owner may have left (deactivated, or no active operator of its workspace:
    a fallback's too, checked exactly by `incident_owner_refresh`) on its locked row: a queue incident,
    which never pages again, gets its new owner too. The number changed. With `owner_id`, only that
    person's incidents: asked in the transaction that deactivates them or takes a role away
    (`incidents/apps.py`), so the new owner is there from that commit, not from the next sweep."""
    operator = active_operators(OuterRef("workspace_id")).filter(user_id=OuterRef("owner_id"))
    owned = Q(owner_id=owner_id) if owner_id is not None else Q(owner_id__isnull=False)
    maybe = (
        Incident.objects.using(DB)
        .alias(has_operator=Exists(operator))
        .exclude(state=IncidentState.RESOLVED)
        .filter(owned)
        .filter(Q(owner__is_active=False) | Q(workspace_id__isnull=False, has_operator=False))
    )
    changed = 0
    for pk in maybe.values_list("pk", flat=True):
        with transaction.atomic(using=DB):
            locked = Incident.objects.using(DB).select_for_update(no_key=True).get(pk=pk)
            changed += locked.state != IncidentState.RESOLVED and incident_owner_refresh(locked)
    return changed


def incident_page(incident: Incident) -> bool:
    """Send the incident's next page (the first, or the next escalation level) if it is still open and
    due; True when a page was queued. The incident row is locked so that two sweeps page once."""
    workspaces = incident.workspace_ids
    timeout, most = EscalationPolicy.objects.using(DB).for_workspaces(workspaces)
    with transaction.atomic(using=DB):
        locked = (
            Incident.objects.using(DB)
            .select_for_update(no_key=True)
            .filter(pk=incident.pk, state=IncidentState.OPEN, pages_sent=incident.pages_sent)
            .first()
        )
        if locked is None or locked.pages_sent >= most:
            return False
        # Paged to an owner who can act: one who left is replaced first (the page goes to the new one).
        incident_owner_refresh(locked)
        channels = channels_at_level(locked, workspaces, locked.pages_sent)
        if channels:
            number = _queue(locked, channels, NotificationEvent.TRIGGER)
            names = ", ".join(c.name for c in channels)
            action = "paged" if locked.pages_sent == 0 else "escalated"
            _event(locked, action, f"notification {message_id(locked.pk, number)} to {names}")
        else:
            _event(locked, "not_paged", "no alert channel is configured for this incident")
        # The escalation's clock starts once the page is queued (after its handoffs are recorded).
        escalates = locked.severity == IncidentSeverity.PAGE and locked.pages_sent + 1 < most
        Incident.objects.using(DB).filter(pk=locked.pk).update(
            pages_sent=locked.pages_sent + 1,
            next_escalation_at=DbNow(timeout) if escalates else None,
        )
    if not channels:
        return False
    incident.pages_sent += 1
    return True


def incident_queue_notice(incident: Incident, *, again: bool = False) -> bool:
    """Tell the queue channels (severity "queue") once about an incident that does not page (`again`: its
    acknowledgement lapsed): no escalation, and it is not a page (a queue incident raised to a page later
    pages as usual)."""
    workspaces = incident.workspace_ids
    with transaction.atomic(using=DB):
        locked = Incident.objects.using(DB).select_for_update(no_key=True).get(pk=incident.pk)
        if not again and Notification.objects.using(DB).filter(incident=locked).exists():
            return False
        channels = [
            c
            for c in channels_at_level(locked, workspaces, 0)
            if c.severity == IncidentSeverity.QUEUE
        ]
        if not channels:
            return False
        number = _queue(locked, channels, NotificationEvent.TRIGGER)
        _event(locked, "queued", f"notification {message_id(locked.pk, number)}")
    return True


def incident_notify(incident: Incident, event: str) -> bool:
    """Tell the channels that were sent a page about this incident that it was acknowledged or resolved."""
    if event == NotificationEvent.TRIGGER:
        return incident_page(incident)
    with transaction.atomic(using=DB):
        triggers = Notification.objects.using(DB).filter(
            incident=incident, event=NotificationEvent.TRIGGER
        )
        # The channels a page was tried at. A page not tried yet is withdrawn at the send step (its cause
        # is over: `notification_send_check`, incidents/services/incidents.py), and its channel is not told
        # the end.
        tried = triggers.with_delivery().filter(
            Q(delivery_attempts__gt=0) | Q(handoff_id__isnull=True)
        )
        paged = AlertChannel.objects.using(DB).filter(
            pk__in=tried.exclude(delivery_state=NotificationState.WITHDRAWN).values("channel_id")
        )
        channels = list(paged)
        if not channels:
            return False
        number = _queue(incident, channels, event)
        _event(incident, f"notified_{event}", f"notification {message_id(incident.pk, number)}")
    return True


def _held_by_owners(incident: Incident) -> bool:
    """A failures incident whose every open handoff is held by its owner (`held_by_its_owner`): a person is
    acting on all of it, so its escalation waits, its due time kept, and goes on once a hold ends or has
    lasted `ALERT_HOLD_QUIET_HOURS`."""
    if incident.kind != IncidentKind.FAILURES:
        return False
    members = IncidentMember.objects.using(DB).filter(incident=incident, settled_at__isnull=True)
    open_ones = members.filter(
        handoff_id__in=Handoff.objects.filter(state__in=OPEN_STATES).values("pk")
    )
    held = Handoff.objects.using(DB).filter(held_by_its_owner()).values("pk")
    return open_ones.exists() and not open_ones.exclude(handoff_id__in=held).exists()


def incidents_escalate() -> int:
    """Page again every open incident whose page was not acknowledged in time. Quiet once acknowledged:
    acknowledging clears `next_escalation_at`; waiting while its owners hold all of it (`_held_by_owners`).
    Due times are compared on the database clock."""
    due = (
        Incident.objects.using(DB)
        .filter(state=IncidentState.OPEN, next_escalation_at__lte=DbNow())
        .order_by("next_escalation_at", "pk")
    )
    return sum(incident_page(incident) for incident in due if not _held_by_owners(incident))


def notifications_failed_note() -> int:
    """Each notification whose handoff went to a person (retries exhausted, an unknown outcome nobody can
    settle) once on its incident's timeline: nobody was told, and the incident says so. Its own `state`
    marks it noted."""
    failed = (
        Notification.objects.using(DB)
        .failed()
        .exclude(state=NotificationState.FAILED)
        .select_related("channel")
    )
    noted = 0
    for notification in failed:
        with transaction.atomic(using=DB):
            marked = (
                Notification.objects.using(DB)
                .filter(pk=notification.pk)
                .exclude(state=NotificationState.FAILED)
                .update(state=NotificationState.FAILED)
            )
            if not marked:
                continue
            IncidentEvent.objects.using(DB).create(
                incident_id=notification.incident_id,
                action="notification_failed",
                actor_label="notification sender",
                note=f"{notification.message_id} to {notification.channel.name}: "
                f"{notification.delivery_error}"[:2000],
            )
            noted += 1
    return noted
